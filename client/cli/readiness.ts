import { formatDuration, isFinished, isReady, TendError, type ReadyCondition, type Task } from '../../protocol/index.js'
import type { StartOptions } from '../client.js'
import { EXIT } from './exit-codes.js'
import { printJson, type CliIo } from './output.js'

/** `tend run`'s readiness flags. */
export interface ReadyFlags {
  readyPattern?: string
  readyPort?: number
  readyHttp?: string
  readyTimeout?: number
  waitReady?: boolean
}

/** The start request's `ready` from the flags: at most one condition; --ready-timeout and --wait-ready need one. */
export function readyOf(flags: ReadyFlags): StartOptions['ready'] {
  const given = [
    flags.readyPattern === undefined ? null : { pattern: flags.readyPattern },
    flags.readyPort === undefined ? null : { port: flags.readyPort },
    flags.readyHttp === undefined ? null : { url: flags.readyHttp },
  ].filter((condition) => condition !== null)
  if (given.length > 1) throw new TendError('TEND_ERR_USAGE', { detail: '--ready-pattern, --ready-port and --ready-http: give one' })
  if (given.length === 0) {
    const lonely = flags.waitReady ? '--wait-ready' : flags.readyTimeout !== undefined ? '--ready-timeout' : null
    if (lonely) throw new TendError('TEND_ERR_USAGE', { detail: `${lonely} needs a condition: --ready-pattern, --ready-port or --ready-http` })
    return undefined
  }
  return { ...given[0], ...(flags.readyTimeout === undefined ? {} : { timeoutMs: flags.readyTimeout }) }
}

/**
 * `tend wait --ready` and `tend run --wait-ready`: the record (--json), and the exit code: 0 once
 * ready; EXIT.notReady when its condition timed out (it runs on); EXIT.endedFirst when it ended
 * first; EXIT.waitTimedOut when the wait's own --timeout passed first.
 */
export function printReadiness(io: CliIo, task: Task): number {
  if (io.json) printJson(io, task)
  const { ready } = task
  if (isReady(ready)) return EXIT.ok
  if (ready && ready.failed === 'timed out') {
    if (!io.json) io.err(`tend: task ${task.id} was not ready within ${conditionText(task.readyWhen!)} (it runs on)`)
    return EXIT.notReady
  }
  if ((ready && ready.failed === 'ended first') || isFinished(task)) {
    if (!io.json) io.err(`tend: task ${task.id} ${endText(task)} before it was ready`)
    return EXIT.endedFirst
  }
  if (!io.json) io.err(`tend: task ${task.id} is not ready yet after the --timeout`)
  return EXIT.waitTimedOut
}

/** The condition and its deadline, for people: `port 3000 (within 60s)`. */
export function describeCondition(condition: ReadyCondition): string {
  const what =
    condition.pattern !== undefined
      ? `a line matching ${JSON.stringify(condition.pattern)}`
      : condition.port !== undefined
        ? `port ${condition.port}`
        : `${condition.url} answers`
  return `${what} (within ${formatDuration(condition.timeoutMs)})`
}

/** The task's readiness, for people: how it became ready, why it never did, or that it still waits. */
export function describeReadiness(task: Task): string | null {
  const { ready } = task
  if (ready === undefined) return null
  if (ready === null) return 'waiting'
  if ('by' in ready) return `yes, by ${ready.by}, at ${ready.at}${ready.line === undefined ? '' : `: ${JSON.stringify(ready.line)}`}`
  return `no, ${ready.failed} (${ready.at})`
}

/** What the deadline was waiting for: `300ms: no line of its output matched "x"`. */
function conditionText(condition: ReadyCondition): string {
  const within = formatDuration(condition.timeoutMs)
  if (condition.pattern !== undefined) return `${within}: no line of its output matched ${JSON.stringify(condition.pattern)}`
  if (condition.port !== undefined) return `${within}: nothing listened on port ${condition.port}`
  return `${within}: ${condition.url} did not answer 2xx or 3xx`
}

function endText(task: Task): string {
  if (task.state === 'exited') return `exited (code ${task.exitCode})`
  return `${task.state}${task.signal ? ` by ${task.signal}` : ''}${task.reason ? ` (${task.reason})` : ''}`
}
