import { readdir } from 'node:fs/promises'
import { realpathSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { Logger } from 'pino'
import { listTaskIds, outputPath, outputSize, readSpoolEntry, recordPath, removeTaskDir, taskDir, type SpoolEntry } from '../../../spool/index.js'
import type { QueuedTask, RecordedTask, RunningTask } from '../../../protocol/index.js'
import type { CorruptEntries } from '../../store/corrupt-entries.js'
import { killLeftovers } from '../../spawn/kill-tree.js'
import { taskMarker } from '../../spawn/run-name.js'
import type { TaskStore } from '../../store/task-store.js'
import { markFailed, type Ending } from '../transitions.js'
import { readTaskExitFile } from '../../spawn/exit-file.js'
import { findUnrecordedStarts } from './unrecorded-starts.js'
import { findKeepersOf } from '../../spawn/keeper-scan.js'
import { removeStrayTemporaries } from '../../store/stray-temporaries.js'
import { sweepTaskCgroups } from './cgroup-sweep.js'
import { outsideSignal } from '../run/ending.js'
import { endedRecord, keeperEndedReason, killGroupLeftovers, settleOutput } from '../run/finish.js'
import { finalUsage } from '../usage/final-usage.js'
import type { GroupRoots } from '../../sandbox/cgroups.js'

type ExitRecord = NonNullable<ReturnType<typeof readTaskExitFile>>

/** How tasks outlive their daemon: what recovery needs to supervise them again. */
export interface Survivors {
  /** This boot's id: a task that started in another boot is lost. */
  bootId: string
  /** Supervises a task of an earlier daemon that still runs under its keeper; false when it cannot. */
  resume: (task: RunningTask) => Promise<boolean>
  /** Holds again a task still queued waiting for its dependencies (`after`), once every other task is recovered. Default: it fails as queued tasks do. */
  rewait?: (task: QueuedTask) => Promise<void>
}

/**
 * Reloads the spool into the store after a start. Tasks that were running when the last daemon
 * died become `lost`, and every process still carrying their marker is killed (the marker holds
 * the task id, so a reused pid of an unrelated process is never hit). Queued ones become `failed`,
 * but for those still waiting for their dependencies (`after`), which wait on (`rewait`).
 * An entry that is not a valid record goes to `corrupt` (never into the store), with its reason:
 * one bad entry never keeps the daemon from starting; whatever of it still runs is killed (marker
 * and cgroup), since no tend command could reach it. Task cgroups of this daemon's that no task
 * supervised again needs are emptied and removed.
 */
export async function recoverSpool(
  spoolRoot: string,
  store: TaskStore,
  corrupt: CorruptEntries,
  log: Logger,
  cgroupRoots: GroupRoots = { memory: null, pids: null },
  survivors?: Survivors,
): Promise<{ loaded: number; corrupt: number; lost: number; killed: number }> {
  const ids = await listTaskIds(spoolRoot)
  let interrupted: RecordedTask[] = []
  let loaded = 0
  const unfinished: Array<NonNullable<SpoolEntry['corrupt']>> = []
  const quarantined: string[] = []
  const quarantine = (entry: NonNullable<SpoolEntry['corrupt']>) => {
    corrupt.add(entry)
    quarantined.push(entry.id)
    log.warn({ taskId: entry.id, reason: entry.reason }, 'corrupt spool entry quarantined')
  }
  for (const id of ids) {
    const strays = await removeStrayTemporaries(taskDir(spoolRoot, id))
    if (strays > 0) log.info({ taskId: id, files: strays }, 'temporary files of writes the last daemon never finished removed')
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
      if (await isUnfinishedCreation(spoolRoot, id)) unfinished.push(entry.corrupt)
      else quarantine(entry.corrupt)
      continue
    }
    const { task } = entry
    store.adopt(task)
    loaded += 1
    if (task.state === 'running' || task.state === 'queued') interrupted.push(task)
  }
  // Unless something of it runs after all (a keeper holds the folder: a task removed its own record).
  const root = realpathSync(spoolRoot)
  const held = findKeepersOf(unfinished.map((entry) => join(root, entry.id)))
  for (const entry of unfinished) {
    if (held.has(join(root, entry.id))) {
      quarantine(entry)
      continue
    }
    await removeTaskDir(spoolRoot, entry.id)
    log.info({ taskId: entry.id }, 'removed the folder of a submission the last daemon never recorded')
  }
  // Tasks still running under their keepers are supervised again; those that ended while no
  // daemon ran are recorded as they ended. Only the rest were interrupted.
  const endedMeanwhile = new Map<string, ExitRecord>()
  const rebooted = new Set<string>()
  const resumed = new Set<string>()
  if (survivors) {
    // A task started just before the crash may still say queued: what exists decides, not the record.
    const queued = interrupted.filter((task): task is QueuedTask => task.state === 'queued')
    const started = new Map((await findUnrecordedStarts(spoolRoot, queued, survivors.bootId)).map((task) => [task.id, task]))
    for (const task of started.values()) await store.save(task)
    if (started.size > 0) log.warn({ tasks: started.size }, 'tasks that started before their running record landed recovered from their keepers and exit files')
    interrupted = interrupted.map((task) => started.get(task.id) ?? task)
    for (const task of interrupted) {
      if (task.state !== 'running') continue
      if (task.bootId !== undefined && task.bootId !== survivors.bootId) {
        rebooted.add(task.id)
        continue
      }
      const exit = readTaskExitFile(spoolRoot, task.id)
      if (exit) endedMeanwhile.set(task.id, exit)
      else if (task.keeper && (await survivors.resume(task))) resumed.add(task.id)
      else {
        // Its keeper may have recorded the end between the two looks.
        const late = readTaskExitFile(spoolRoot, task.id)
        if (late) endedMeanwhile.set(task.id, late)
      }
    }
    interrupted = interrupted.filter((task) => !resumed.has(task.id))
    if (resumed.size > 0) log.info({ resumed: resumed.size }, 'running tasks of an earlier daemon supervised again')
  }
  // Queued ones too: a task can have started in the moment before its running record landed. And a
  // corrupt entry's, by its id (its run's name was in the record): no tend command could reach them
  // once its folder is quarantined.
  const found = await killLeftovers([...interrupted.map(taskMarker), ...quarantined.map((id) => taskMarker({ id }))])
  let killed = [...found.values()].reduce((sum, pids) => sum + pids.length, 0)
  // A task's cgroup outlives its daemon and lists what is left of it exactly (even processes that
  // cleared their environment).
  const startedUnrecorded = new Set(
    interrupted.filter((task) => task.state === 'queued' && (found.get(taskMarker(task))?.length ?? 0) > 0).map((task) => task.id),
  )
  for (const id of interrupted.map((task) => task.id)) {
    const members = await killGroupLeftovers(cgroupRoots, id)
    if (members > 0) startedUnrecorded.add(id)
    killed += members
  }
  // Every other group of this daemon's: a corrupt entry's, one whose folder is gone, one left behind.
  killed += await sweepTaskCgroups(cgroupRoots, resumed)
  const now = new Date()
  // An exit file's time is the task's to write under `off`: the end it says is taken only between
  // the start the daemon recorded and this daemon's clock.
  const recoveredEnd = (task: { startedAt: string | null }, exit: ExitRecord) =>
    new Date(Math.min(Math.max(Date.parse(exit.endedAt), task.startedAt ? Date.parse(task.startedAt) : 0), now.getTime()))
  const recoveredUsage = (task: { id: string; startedAt: string | null }, exit: ExitRecord) =>
    finalUsage(exit.usage, null, { taskId: task.id, startedAt: task.startedAt, endedAtMs: recoveredEnd(task, exit).getTime(), log })
  const waitingAgain: QueuedTask[] = []
  for (const task of interrupted) {
    if (task.state === 'running') {
      // Nobody enforced the cap while no daemon ran: the output is cut back to it now.
      const outputBytes = await settleOutput(
        { taskId: task.id, file: outputPath(spoolRoot, task.id), held: undefined, maxOutputBytes: task.maxOutputBytes },
        log,
      )
      const exit = endedMeanwhile.get(task.id)
      // Killed by its keeper when the daemon went: nobody stopped it, the daemon's end did.
      if (exit?.lifelineBroke || exit?.leaseRanOut)
        await store.save(
          endedRecord(task, { lost: keeperEndedReason(exit) }, outputBytes, recoveredEnd(task, exit), exit.outputLostBytes, recoveredUsage(task, exit)),
        )
      else if (exit)
        await store.save(
          endedRecord(task, { ending: endingFromExit(exit) }, outputBytes, recoveredEnd(task, exit), exit.outputLostBytes, recoveredUsage(task, exit)),
        )
      else if (rebooted.has(task.id)) await store.save(endedRecord(task, { lost: 'the machine restarted while the task ran' }, outputBytes, now))
      else
        await store.save(
          endedRecord(
            task,
            {
              lost: task.keeper
                ? 'the task ran on when its daemon stopped, but its keeper is gone without recording how it ended; what was left of it was killed'
                : 'the daemon stopped while the task ran; its processes were killed by the next daemon',
            },
            outputBytes,
            now,
          ),
        )
    } else if (task.state === 'queued' && task.after && survivors?.rewait && !startedUnrecorded.has(task.id)) {
      waitingAgain.push(task)
    } else {
      const reason = startedUnrecorded.has(task.id)
        ? 'the daemon stopped while the task was starting; its processes were killed by the next daemon'
        : 'the daemon stopped before the task started'
      await store.save(markFailed(task, reason, now))
    }
  }
  // Judged on what every other task became above: a dependency that ended while no daemon ran counts as it ended.
  for (const task of waitingAgain) await survivors!.rewait!(task)
  if (waitingAgain.length > 0) log.info({ waiting: waitingAgain.length }, 'queued tasks waiting for their dependencies held again')
  const lost = interrupted.length - endedMeanwhile.size - waitingAgain.length
  if (killed > 0 || lost > 0) log.warn({ lost, ended: endedMeanwhile.size, killed }, 'interrupted tasks recovered')
  return { loaded, corrupt: corrupt.size, lost, killed }
}

/** A task that ended while no daemon ran, as its keeper recorded it: tend stopped nothing meanwhile. */
function endingFromExit(exit: ExitRecord): Ending {
  if (exit.signal) return outsideSignal(exit.signal, null, ', while no daemon ran')
  return { state: 'exited', exitCode: exit.exitCode ?? 0 }
}

/**
 * A folder holding nothing but an empty output.log (or nothing at all), and no task.json: its
 * record was never renamed into place (a temporary one, removed above, may have been there). No
 * task starts before its record lands, so nothing of it ran.
 */
async function isUnfinishedCreation(spoolRoot: string, id: string): Promise<boolean> {
  const dir = dirname(recordPath(spoolRoot, id))
  const names = await readdir(dir).catch(() => null)
  if (names === null || names.some((name) => name !== 'output.log')) return false
  return names.length === 0 || (await outputSize(outputPath(spoolRoot, id))) === 0
}
