import type { Task } from '../protocol/index.js'
import { outputPath, outputSize } from '../spool/index.js'

/**
 * A running task's record holds the output size of the last cap check; answers show the size on
 * disk now (up to the cap).
 */
export async function withLiveOutput(spoolRoot: string, task: Task): Promise<Task> {
  if (task.state !== 'running') return task
  const size = await outputSize(outputPath(spoolRoot, task.id))
  return { ...task, outputBytes: Math.min(size, task.maxOutputBytes) }
}
