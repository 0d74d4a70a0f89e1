import { taskLabel, type Task } from '../../client/index.js'

/** The completion notice of DESIGN.md, word for word. */
export function noticeText(task: Task): string {
  const exitCode = task.exitCode === null ? 'none' : String(task.exitCode)
  return `background task ${task.id} (${taskLabel(task)}) finished [status: ${task.state}, exit code: ${exitCode}]. Read its output with task_output.`
}
