import { createHash } from 'node:crypto'
import { isWorkerName } from '../../protocol/index.js'

/**
 * A worker's name when none is set: `host:home-folder`. One that does not fit a worker's name
 * (letters, digits and `_.:@-`, up to 128: what `tend workers` lists) has the other characters
 * made `-`, cut, and a hash of the whole added, so that two homes the rule would make alike
 * (`proj a`, `proj-a`; two names in another script) still get names of their own.
 */
export function defaultWorkerName(host: string, homeFolder: string): string {
  const name = `${host}:${homeFolder}`
  // String(): the check narrows only its own argument, not the name used after it.
  if (isWorkerName(String(name))) return name
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 8)
  return `${name.replace(/[^A-Za-z0-9_.:@-]/g, '-').slice(0, 119)}-${hash}`
}
