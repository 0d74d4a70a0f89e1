import { taskLabel, type Task } from '../../client/index.js'
import { costSummary } from './cost-summary.js'

/**
 * The completion notice of DESIGN.md; a stopped task's adds who stopped it
 * (`[status: timed_out, exit code: none, stopped by: timeout]`).
 */
export function noticeText(task: Task): string {
  const exitCode = task.exitCode === null ? 'none' : String(task.exitCode)
  const stoppedBy = task.stoppedBy ? `, stopped by: ${task.stoppedBy}` : ''
  const cost = costSummary(task)
  return (
    `background task ${task.id} (${taskLabel(task)}) finished [status: ${task.state}, exit code: ${exitCode}${stoppedBy}` +
    `]${cost ? `; ${cost}` : ''}. Read its output with task_output.`
  )
}
