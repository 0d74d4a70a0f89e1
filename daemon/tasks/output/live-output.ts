import { isTendError, type LiveUsage, type Task } from '../../../protocol/index.js'
import { taskOutput } from '../../../spool/index.js'
import type { HeldOutputs } from './held-outputs.js'

/**
 * A running task's record holds the output size of the last cap check; answers show the size on
 * disk now (up to the cap), of the file its keeper writes. When output.log is gone the record's size stands (a read of the output
 * says TEND_ERR_OUTPUT_MISSING): listing and showing tasks keep working. `live`: its live figures,
 * when the answer asked for them.
 */
export async function withLiveOutput(outputs: HeldOutputs, spoolRoot: string, task: Task, live?: LiveUsage): Promise<Task> {
  if (task.state !== 'running') return task
  try {
    const size = await outputs.source(task.id, taskOutput(spoolRoot, task.id)).size()
    // One copy with both (a record has some forty fields: a thousand copies a second count).
    return live ? { ...task, outputBytes: Math.min(size, task.maxOutputBytes), live } : { ...task, outputBytes: Math.min(size, task.maxOutputBytes) }
  } catch (error) {
    if (isTendError(error, 'TEND_ERR_OUTPUT_MISSING')) return live ? { ...task, live } : task
    throw error
  }
}
