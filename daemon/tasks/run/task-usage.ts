import type { TaskUsage } from '../../../protocol/index.js'
import type { SpawnExit } from '../../spawn/spawner.js'
import { finalUsage, keeperUsageOf, type CountedRun } from '../usage/final-usage.js'
import type { SampledTask } from '../usage/live-sampler.js'
import type { Tracked } from './task-run-context.js'

// What a run reads of its task's usage: live, while it runs, and once its leader has exited.

/** What the live sampler reads of a tracked task (usage/live-sampler.ts); null when its leader had ended as it was tracked. */
export function sampledTask(id: string, tracked: Tracked, startedAtMs: number): SampledTask | null {
  if (tracked.leader === null) return null
  return {
    id,
    startedAtMs,
    leaderPid: tracked.pid,
    leaderStartTicks: tracked.leader ? Number(tracked.leader.startTime) : 0,
    ...(tracked.resources.cgroups ? { membersFile: tracked.resources.cgroups.membersFile } : {}),
    // Every keeper is a child subreaper (keeper.c; a terminal's too): the task's orphans stay in its tree.
    ...(tracked.keeper ? { keeper: tracked.keeper } : {}),
  }
}

/** What the task used (usage/final-usage.ts): its keeper's figures, from the exit it reported or its exit file, and its memory group's peak. */
export async function usageAtEnd(exit: SpawnExit, tracked: Tracked, spoolRoot: string, run: Omit<CountedRun, 'endedAtMs'>): Promise<TaskUsage | undefined> {
  const { pid, resources, keeper } = tracked
  const counted = exit.usage ?? (keeper ? keeperUsageOf(spoolRoot, run.taskId, pid) : undefined)
  const ended = { ...run, endedAtMs: Date.now() }
  const [peak, group] = await Promise.all([resources.cgroups?.peakMemoryBytes(), resources.cgroups?.unifiedUsage()])
  return finalUsage(counted, peak ?? null, ended, group ?? null)
}
