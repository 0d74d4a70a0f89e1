import { isTendError, type Task } from '../../../protocol/index.js'
import { taskOutput } from '../../../spool/index.js'
import type { HeldOutputs } from './held-outputs.js'

/**
 * A running task's record holds the output size of the last cap check; answers show the size on
 * disk now (up to the cap), of the file its keeper writes. When output.log is gone the record's size stands (a read of the output
 * says TEND_ERR_OUTPUT_MISSING): listing and showing tasks keep working.
 */
export async function withLiveOutput(outputs: HeldOutputs, spoolRoot: string, task: Task): Promise<Task> {
  if (task.state !== 'running') return task
  try {
    const size = await outputs.source(task.id, taskOutput(spoolRoot, task.id)).size()
    return { ...task, outputBytes: Math.min(size, task.maxOutputBytes) }
  } catch (error) {
    if (isTendError(error, 'TEND_ERR_OUTPUT_MISSING')) return task
    throw error
  }
}
