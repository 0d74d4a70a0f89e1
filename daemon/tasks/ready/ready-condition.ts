import { READY_TIMEOUT_MS, TendError, type ReadyCondition, type StartTaskBody } from '../../../protocol/index.js'
import { compileLinePattern } from '../output/line-pattern.js'

/**
 * A start request's `ready` as the record keeps it (`readyWhen`): exactly one of pattern, port and
 * url, its timeout filled in; a pattern RE2 cannot take is refused here, at admission. Undefined:
 * no condition.
 */
export function normalizeReadyCondition(ready: StartTaskBody['ready']): ReadyCondition | undefined {
  if (ready === undefined) return undefined
  const given = (['pattern', 'port', 'url'] as const).filter((kind) => ready[kind] !== undefined)
  if (given.length !== 1)
    throw new TendError('TEND_ERR_VALIDATION', {
      detail: `ready: exactly one of pattern, port and url is needed, got ${given.length === 0 ? 'none' : given.join(' and ')}`,
    })
  if (ready.pattern !== undefined) compileLinePattern(ready.pattern, 'ready.pattern')
  if (ready.url !== undefined) checkUrl(ready.url)
  const timeoutMs = ready.timeoutMs ?? READY_TIMEOUT_MS
  if (ready.pattern !== undefined) return { pattern: ready.pattern, timeoutMs }
  if (ready.port !== undefined) return { port: ready.port, timeoutMs }
  return { url: ready.url!, timeoutMs }
}

function checkUrl(url: string): void {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new TendError('TEND_ERR_VALIDATION', { detail: `ready.url: not a URL: ${JSON.stringify(url)}` })
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new TendError('TEND_ERR_VALIDATION', { detail: `ready.url: expected an http or https URL, got ${JSON.stringify(url)}` })
}
