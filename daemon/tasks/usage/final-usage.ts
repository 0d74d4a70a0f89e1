import type { Task, TaskUsage } from '../../../protocol/index.js'
import { readTaskExitFile } from '../../spawn/exit-file.js'
import type { KeeperUsage } from '../../spawn/spawner.js'
import type { UnifiedUsage } from '../../sandbox/cgroup-v2-group.js'
import { figurePastBounds, usageBounds } from './usage-bounds.js'

/** The run the figures are of, to bound them (usage-bounds.ts), and where a refusal is said. */
export interface CountedRun {
  taskId: string
  /** The daemon's record of the start (null: never recorded). */
  startedAt: string | null
  /** When the run ended, in ms since the epoch, never later than the daemon's clock says now. */
  endedAtMs: number
  log: { warn: (fields: Record<string, unknown>, message: string) => void }
}

/**
 * What a task used, for its final record: CPU time and bytes read and written as its keeper
 * counted them (every process of the tree it reaped: under a sandbox that is the whole tree, which
 * bubblewrap's pid namespace hands to its init, reaped before the keeper's child is), and the peak
 * memory of its memory cgroup where it has one (the tree's together, `source: 'cgroup'`), else the
 * largest single process's peak (`source: 'rusage'`). None when no keeper counted (the node
 * spawner has none, a keeper that was killed wrote nothing), and none when a figure is past what
 * the kernel allows for the run (a task can write its exit file: usage-bounds.ts), with a log line.
 */
export function finalUsage(
  keeperCounted: KeeperUsage | undefined,
  cgroupPeakBytes: number | null,
  run: CountedRun,
  group: UnifiedUsage | null = null,
): TaskUsage | undefined {
  const counted = withGroupFigures(keeperCounted, group)
  if (!counted) return undefined
  const past = figurePastBounds(counted, usageBounds(run.startedAt, run.endedAtMs))
  if (past) {
    run.log.warn({ taskId: run.taskId, ...past }, 'usage figures past what the run allows were refused')
    return undefined
  }
  if (cgroupPeakBytes === null) return { ...counted, source: 'rusage' }
  return { ...counted, peakMemoryBytes: cgroupPeakBytes, source: 'cgroup' }
}

/**
 * A task with a cgroup v2 group: CPU time from its cpu.stat, and bytes read and written from its
 * io.stat where it has the io controller. They count every process of the group, escapees its
 * keeper never reaped included. Without a keeper, only a group with every figure gives them.
 */
function withGroupFigures(counted: KeeperUsage | undefined, group: UnifiedUsage | null): KeeperUsage | undefined {
  if (!group || group.cpuUserMs === null || group.cpuSystemMs === null) return counted
  const cpu = { cpuUserMs: group.cpuUserMs, cpuSystemMs: group.cpuSystemMs }
  const io = group.readBytes !== null && group.writeBytes !== null ? { readBytes: group.readBytes, writeBytes: group.writeBytes } : null
  if (counted) return { ...counted, ...cpu, ...io }
  if (io === null || group.peakMemoryBytes === null) return undefined
  return { ...cpu, ...io, peakMemoryBytes: group.peakMemoryBytes }
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
