import type { Task } from '../../../protocol/index.js'

/** An ended task listens on nothing: its `ports` (when it has them) are emptied in the record that ends it. */
export function withPortsCleared<T extends Task>(task: T): T {
  if ((task.ports === undefined || task.ports.length === 0) && task.portsOmitted === undefined) return task
  // Object.assign, not a spread after fields: see createQueuedTask.
  const cleared = Object.assign({}, task, { ports: [] })
  delete cleared.portsOmitted
  return cleared
}
