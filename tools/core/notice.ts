import { taskLabel, type Task } from '../../client/index.js'
import { costSummary } from './cost-summary.js'

/**
 * The completion notice of DESIGN.md; a stopped task's adds who stopped it
 * (`[status: timed_out, exit code: none, stopped by: timeout]`), and one whose record has `usage`
 * what it cost (`; exited 0 after 41 s · CPU 2 m 3 s · peak 1.2 GiB`).
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
