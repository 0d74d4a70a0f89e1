import type { Task } from '../../client/index.js'
import { formatTaskSummary } from '../../protocol/usage-summary.js'

/**
 * What an ended task cost, in one line for the model: `exited 0 after 41 s · CPU 2 m 3 s · peak
 * 1.2 GiB` (the CLI's words, protocol/usage-summary.ts). Null while it runs, and for a record
 * without `usage` (a daemon that does not measure). A peak measured by rusage is the largest single
 * process's, not the tree's, and says so.
 */
export function costSummary(task: Task): string | null {
  if (!task.usage || task.endedAt === null) return null
  return `${formatTaskSummary(task)}${task.usage.source === 'rusage' ? ' (largest process)' : ''}`
}

/** `text`, then the task's cost on a line of its own in brackets once it has ended (costSummary). */
export function withCost(text: string, task: Task): string {
  const cost = costSummary(task)
  return cost === null ? text : `${text}\n[${cost}]`
}
