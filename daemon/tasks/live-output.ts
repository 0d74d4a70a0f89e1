import { isTendError, type Task } from '../../protocol/index.js'
import { outputPath, readableOutputSize } from '../../spool/index.js'

/**
 * A running task's record holds the output size of the last cap check; answers show the size on
 * disk now (up to the cap). When output.log is gone the record's size stands (a read of the output
 * says TEND_ERR_OUTPUT_MISSING): listing and showing tasks keep working.
 */
export async function withLiveOutput(spoolRoot: string, task: Task): Promise<Task> {
  if (task.state !== 'running') return task
  try {
    const size = await readableOutputSize(outputPath(spoolRoot, task.id))
    return { ...task, outputBytes: Math.min(size, task.maxOutputBytes) }
  } catch (error) {
    if (isTendError(error, 'TEND_ERR_OUTPUT_MISSING')) return task
    throw error
  }
}
