import { taskLabel, type Task } from '../../client/index.js'
import { withCost } from './cost-summary.js'

/**
 * The completion notice of DESIGN.md; a stopped task's adds who stopped it
 * (`[status: timed_out, exit code: none, stopped by: timeout]`). What the task cost follows on a
 * line of its own, in brackets as a result shows it (`[exited 0 after 41 s · CPU 2 m 3 s · peak
 * 1.2 GiB]`): the contract's sentence stays whole, so whoever reads it as DESIGN.md writes it
 * still finds it, up to its `Read its output with task_output.`
 */
export function noticeText(task: Task): string {
  const exitCode = task.exitCode === null ? 'none' : String(task.exitCode)
  const stoppedBy = task.stoppedBy ? `, stopped by: ${task.stoppedBy}` : ''
  const notice =
    `background task ${task.id} (${taskLabel(task)}) finished [status: ${task.state}, exit code: ${exitCode}${stoppedBy}]` +
    '. Read its output with task_output.'
  return withCost(notice, task)
}
