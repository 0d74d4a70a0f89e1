import { readdir } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { Logger } from 'pino'
import { exitPath, listTaskIds, outputPath, outputSize, readSpoolEntry, recordPath, removeTaskDir, truncateRegularFile, type SpoolEntry } from '../../spool/index.js'
import type { RecordedTask, RunningTask } from '../../protocol/index.js'
import type { CorruptEntries } from '../store/corrupt-entries.js'
import { killLeftovers, killMembers } from '../spawn/kill-tree.js'
import { taskMarker } from '../spawn/task-run.js'

import { TaskCgroups } from '../sandbox/cgroups.js'
import type { TaskStore } from '../store/task-store.js'
import { markEnded, markFailed, markLost, type Ending } from './transitions.js'
import { readExitFile } from '../spawn/exit-file.js'
import { DAEMON_ENDED_LIFELINE, LEASE_RAN_OUT, outsideSignal } from './ending.js'

type ExitRecord = NonNullable<ReturnType<typeof readExitFile>>

/** How tasks outlive their daemon: what recovery needs to supervise them again. */
export interface Survivors {
  /** This boot's id: a task that started in another boot is lost. */
  bootId: string
  /** Supervises a task of an earlier daemon that still runs under its keeper; false when it cannot. */
  resume: (task: RunningTask) => Promise<boolean>
}

/**
 * Reloads the spool into the store after a start. Tasks that were running when the last daemon
 * died become `lost`, and every process still carrying their marker is killed (the marker holds
 * the task id, so a reused pid of an unrelated process is never hit). Queued ones become `failed`.
 * An entry that is not a valid record goes to `corrupt` (never into the store), with its reason:
 * one bad entry never keeps the daemon from starting.
 */
export async function recoverSpool(
  spoolRoot: string,
  store: TaskStore,
  corrupt: CorruptEntries,
  log: Logger,
  cgroupRoots: { memory: string | null; pids: string | null } = { memory: null, pids: null },
  survivors?: Survivors,
): Promise<{ loaded: number; corrupt: number; lost: number; killed: number }> {
  const ids = await listTaskIds(spoolRoot)
  let interrupted: RecordedTask[] = []
  let loaded = 0
  for (const id of ids) {
    let entry: SpoolEntry
    try {
      entry = await readSpoolEntry(spoolRoot, id)
    } catch (error) {
      // Gone between the listing and the read: nothing is left to load.
      log.warn({ taskId: id, err: error }, 'spool entry vanished while loading')
      continue
    }
    if (entry.corrupt) {
      // A daemon that died while it made a task's folder leaves one with an empty output.log and no
      // record: that submission was never answered (its retry made another task). Not a task.
      if (await isUnfinishedCreation(spoolRoot, id)) {
        await removeTaskDir(spoolRoot, id)
        log.info({ taskId: id }, 'removed the folder of a submission the last daemon never recorded')
        continue
      }
      corrupt.add(entry.corrupt)
      log.warn({ taskId: id, reason: entry.corrupt.reason }, 'corrupt spool entry quarantined')
      continue
    }
    const { task } = entry
    store.adopt(task)
    loaded += 1
    if (task.state === 'running' || task.state === 'queued') interrupted.push(task)
  }
  // Tasks still running under their keepers are supervised again; those that ended while no
  // daemon ran are recorded as they ended. Only the rest were interrupted.
  const endedMeanwhile = new Map<string, ExitRecord>()
  const rebooted = new Set<string>()
  if (survivors) {
    const resumed = new Set<string>()
    for (const task of interrupted) {
      if (task.state !== 'running') continue
      if (task.bootId !== undefined && task.bootId !== survivors.bootId) {
        rebooted.add(task.id)
        continue
      }
      const exit = readExitFile(exitPath(spoolRoot, task.id))
      if (exit) endedMeanwhile.set(task.id, exit)
      else if (task.keeper && (await survivors.resume(task))) resumed.add(task.id)
      else {
        // Its keeper may have recorded the end between the two looks.
        const late = readExitFile(exitPath(spoolRoot, task.id))
        if (late) endedMeanwhile.set(task.id, late)
      }
    }
    interrupted = interrupted.filter((task) => !resumed.has(task.id))
    if (resumed.size > 0) log.info({ resumed: resumed.size }, 'running tasks of an earlier daemon supervised again')
  }
  // Queued ones too: a task can have started in the moment before its running record landed.
  const found = await killLeftovers(interrupted.map(taskMarker))
  let killed = [...found.values()].reduce((sum, pids) => sum + pids.length, 0)
  // A task's cgroup outlives its daemon and lists what is left of it exactly (even processes that
  // cleared their environment).
  const startedUnrecorded = new Set(interrupted.filter((task) => task.state === 'queued' && (found.get(taskMarker(task))?.length ?? 0) > 0).map((task) => task.id))
  for (const id of interrupted.map((task) => task.id)) {
    if (cgroupRoots.pids) {
      const members = await killMembers(() => TaskCgroups.leftoverMembers(cgroupRoots.pids!, id))
      if (members > 0) startedUnrecorded.add(id)
      killed += members
    }
    await TaskCgroups.removeLeftover(cgroupRoots, id)
  }
  const now = new Date()
  for (const task of interrupted) {
    if (task.state === 'running') {
      const file = outputPath(spoolRoot, task.id)
      const bytes = await outputSize(file)
      // Nobody enforced the cap while no daemon ran: cut the output back to it now.
      if (bytes > task.maxOutputBytes) await truncateRegularFile(file, task.maxOutputBytes).catch((error: unknown) => log.warn({ taskId: task.id, err: error }, 'output past its cap could not be cut off'))
      const outputBytes = Math.min(bytes, task.maxOutputBytes)
      const exit = endedMeanwhile.get(task.id)
      // Killed by its keeper when the daemon went: nobody stopped it, the daemon's end did.
      if (exit?.lifelineBroke || exit?.leaseRanOut) await store.save(markLost(task, exit.leaseRanOut ? LEASE_RAN_OUT : DAEMON_ENDED_LIFELINE, outputBytes, new Date(exit.endedAt)))
      else if (exit) await store.save(markEnded(task, endingFromExit(exit), outputBytes, new Date(exit.endedAt)))
      else if (rebooted.has(task.id)) await store.save(markLost(task, 'the machine restarted while the task ran', outputBytes, now))
      else await store.save(markLost(task, exit === undefined && task.keeper ? 'the task ran on when its daemon stopped, but its keeper is gone without recording how it ended; what was left of it was killed' : 'the daemon stopped while the task ran; its processes were killed by the next daemon', outputBytes, now))
    } else {
      const reason = startedUnrecorded.has(task.id)
        ? 'the daemon stopped while the task was starting; its processes were killed by the next daemon'
        : 'the daemon stopped before the task started'
      await store.save(markFailed(task, reason, now))
    }
  }
  if (killed > 0 || interrupted.length > 0) log.warn({ lost: interrupted.length - endedMeanwhile.size, ended: endedMeanwhile.size, killed }, 'interrupted tasks recovered')
  return { loaded, corrupt: corrupt.size, lost: interrupted.length - endedMeanwhile.size, killed }
}

/** A task that ended while no daemon ran, as its keeper recorded it: tend stopped nothing meanwhile. */
function endingFromExit(exit: ExitRecord): Ending {
  if (exit.signal) return outsideSignal(exit.signal, null, ', while no daemon ran')
  return { state: 'exited', exitCode: exit.exitCode ?? 0 }
}

/** A folder holding nothing but an empty output.log (or nothing at all), and no task.json. */
async function isUnfinishedCreation(spoolRoot: string, id: string): Promise<boolean> {
  const dir = dirname(recordPath(spoolRoot, id))
  const names = await readdir(dir).catch(() => null)
  if (names === null || names.some((name) => name !== 'output.log')) return false
  return names.length === 0 || (await outputSize(outputPath(spoolRoot, id))) === 0
}
