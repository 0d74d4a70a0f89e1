import { outputPath } from '../../../spool/index.js'
import { measureOutput, outputOverCap } from '../output/output-cap.js'
import { settleOutput } from './finish.js'
import type { TaskRunContext } from './task-run-context.js'

// A run's output.log against its cap: measured while the task runs, settled once it has ended.

/** Measures the running task's output, records its size (at most the cap), and answers why it is past its cap, or null. */
export async function outputPastCap(context: Pick<TaskRunContext, 'store' | 'outputs' | 'config'>, id: string): Promise<string | null> {
  const { store, outputs, config } = context
  const task = store.findCurrent(id)
  if (!task) return null
  const footprint = await measureOutput(outputs.held(id), outputPath(config.layout.spool, id), task.outputBytes)
  store.patch(id, { outputBytes: Math.min(footprint.size, task.maxOutputBytes) })
  return outputOverCap(footprint, task.maxOutputBytes)
}

/** The ended task's final output size, cut back to the cap (finish.ts). */
export function settledOutputBytes(context: Pick<TaskRunContext, 'store' | 'outputs' | 'config' | 'log'>, id: string): Promise<number> {
  const { store, outputs, config, log } = context
  const task = store.current(id)
  return settleOutput({ taskId: id, file: outputPath(config.layout.spool, id), held: outputs.held(id), maxOutputBytes: task.maxOutputBytes }, log)
}
