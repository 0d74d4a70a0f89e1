import { createHash } from 'node:crypto'
import { OWNER_PATTERN } from '../../protocol/index.js'

const OWNER = new RegExp(OWNER_PATTERN)

/**
 * The tend owner of an agent: its session id when tend accepts it as an owner name (ids the
 * harness mints do), else `dsh-` and a digest of it — stable, so the same session always maps
 * to the same owner, and no two sessions share one.
 */
export function ownerOfSession(sessionId: string): string {
  if (OWNER.test(sessionId)) return sessionId
  return `dsh-${createHash('sha256').update(sessionId).digest('hex').slice(0, 32)}`
}
