import type { Task, TaskUsage } from '../../../protocol/index.js'
import { readTaskExitFile } from '../../spawn/exit-file.js'
import type { KeeperUsage } from '../../spawn/spawner.js'

/**
 * What a task used, for its final record: CPU time and bytes read and written as its keeper
 * counted them (every process of the tree it reaped: under a sandbox that is the whole tree, which
 * bubblewrap's pid namespace hands to its init, reaped before the keeper's child is), and the peak
 * memory of its memory cgroup where it has one (the tree's together, `source: 'cgroup'`), else the
 * largest single process's peak (`source: 'rusage'`). None when no keeper counted (the node
 * spawner has none, a keeper that was killed wrote nothing).
 */
export function finalUsage(counted: KeeperUsage | undefined, cgroupPeakBytes: number | null): TaskUsage | undefined {
  if (!counted) return undefined
  if (cgroupPeakBytes === null) return { ...counted, source: 'rusage' }
  return { ...counted, peakMemoryBytes: cgroupPeakBytes, source: 'cgroup' }
}

/** The figures a task's keeper wrote in its exit file, when the file is that task's (its pid). */
export function keeperUsageOf(spoolRoot: string, id: string, pid: number): KeeperUsage | undefined {
  const recorded = readTaskExitFile(spoolRoot, id)
  return recorded?.pid === pid ? recorded.usage : undefined
}

/** The record with what the task used, when that is known. */
export function withUsage<T extends Task>(task: T, usage: TaskUsage | undefined): T {
  if (!usage) return task
  // Object.assign, not a spread after fields: see createQueuedTask.
  return Object.assign({}, task, { usage })
}
