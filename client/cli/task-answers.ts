import { exitStatusOf, isFinished, sandboxHint, type Task } from '../../protocol/index.js'
import { EXIT } from './exit-codes.js'
import { printJson, stoppedByText, type CliIo } from './output.js'

/** `tend kill`'s answer for a task record: the record, or one line of how it stands. */
export function printKilled(io: CliIo, task: Task): number {
  if (io.json) printJson(io, task)
  else io.out(killedLine(task))
  return EXIT.ok
}

/** One line of how a killed task stands. */
export function killedLine(task: Task): string {
  return `${task.id} ${task.state}${task.signal ? ` by ${task.signal}` : ''}${stoppedByText(task)}${task.reason ? `: ${task.reason}` : ''}`
}

/**
 * `tend wait`'s answer for a task record: its exit status once it has ended, else the timeout's
 * exit code; the sandbox's hint when the end of its output (`outputTail`) shows a refusal.
 */
export function printWaited(io: CliIo, id: string, task: Task, outputTail = ''): number {
  if (io.json) printJson(io, task)
  if (!isFinished(task)) {
    if (!io.json) io.err(`tend: task ${id} is still ${task.state} after the --timeout`)
    return EXIT.waitTimedOut
  }
  if (!io.json && task.state !== 'exited') io.err(`tend: task ${id} ${task.state}: ${task.reason ?? ''}`.trimEnd())
  const hint = sandboxHint(task, outputTail)
  if (hint) io.err(hint)
  return exitStatusOf(task) ?? EXIT.waitFailed
}
