import { realpathSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import type { QueuedTask, RunningTask } from '../../../protocol/index.js'
import { readTaskExitFile } from '../../spawn/exit-file.js'
import { findKeepersOf, startedAtOf } from '../../spawn/keeper-scan.js'
import { isAliveIdentity } from '../../spawn/process-scan.js'
import { markStarted } from '../transitions.js'

/** How long a keeper whose task has ended is given to write the exit file and go. */
const KEEPER_FINISH_MS = 5000

/**
 * Tasks still queued on disk that did start: a daemon killed between a task's start and the
 * landing of its running record leaves that record behind. What happened is read from what exists,
 * not from the record: an exit file (the task ran and ended) or a live keeper holding the task's
 * folder (it runs). Answers the running record each such task should have had (its pid, its keeper
 * when one is alive), for recovery to finish as it does for any running task; tasks with neither
 * are left out (they never started, or nothing of them can be found any more).
 */
export async function findUnrecordedStarts(spoolRoot: string, queued: readonly QueuedTask[], bootId: string): Promise<RunningTask[]> {
  const started: RunningTask[] = []
  const unknown: QueuedTask[] = []
  for (const task of queued) {
    const exit = readTaskExitFile(spoolRoot, task.id)
    // Its start time died with the daemon: it started after it was admitted, which is the best bound left.
    if (exit) started.push(markStarted(task, exit.pid, new Date(task.createdAt)))
    else unknown.push(task)
  }
  if (unknown.length === 0) return started
  const root = realpathSync(spoolRoot)
  const keepers = findKeepersOf(unknown.map((task) => join(root, task.id)))
  for (const task of unknown) {
    const found = keepers.get(join(root, task.id))
    if (!found) continue
    if (found.leader) {
      const startedAt = startedAtOf(found.leader.startTicks) ?? new Date(task.createdAt)
      started.push(markStarted(task, found.leader.pid, startedAt, found.keeper, bootId))
      continue
    }
    // The task has ended and its keeper is writing the exit file: read once it has gone.
    const keeper = { pid: found.keeper.pid, startTime: String(found.keeper.startTicks) }
    for (const deadline = Date.now() + KEEPER_FINISH_MS; isAliveIdentity(keeper) && Date.now() < deadline; ) await delay(20)
    const exit = readTaskExitFile(spoolRoot, task.id)
    if (exit) started.push(markStarted(task, exit.pid, new Date(task.createdAt)))
  }
  return started
}
