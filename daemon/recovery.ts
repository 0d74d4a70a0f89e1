import { readdir, truncate } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { Logger } from 'pino'
import { listTaskIds, outputPath, outputSize, readSpoolEntry, recordPath, removeTaskDir, type SpoolEntry } from '../spool/index.js'
import type { RecordedTask } from '../protocol/index.js'
import type { CorruptEntries } from './corrupt-entries.js'
import { killLeftovers, killMembers } from './kill-tree.js'
import { TaskCgroups } from './sandbox/cgroups.js'
import type { TaskStore } from './task-store.js'
import { markFailed, markLost } from './transitions.js'

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
): Promise<{ loaded: number; corrupt: number; lost: number; killed: number }> {
  const ids = await listTaskIds(spoolRoot)
  const interrupted: RecordedTask[] = []
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
  // Queued ones too: a task can have started in the moment before its running record landed.
  const found = await killLeftovers(interrupted.map((task) => task.id))
  let killed = [...found.values()].reduce((sum, pids) => sum + pids.length, 0)
  // A task's cgroup outlives its daemon and lists what is left of it exactly (even processes that
  // cleared their environment).
  const startedUnrecorded = new Set(interrupted.filter((task) => task.state === 'queued' && (found.get(task.id)?.length ?? 0) > 0).map((task) => task.id))
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
      if (bytes > task.maxOutputBytes) await truncate(file, task.maxOutputBytes)
      await store.save(markLost(task, 'the daemon stopped while the task ran; its processes were killed by the next daemon', Math.min(bytes, task.maxOutputBytes), now))
    } else {
      const reason = startedUnrecorded.has(task.id)
        ? 'the daemon stopped while the task was starting; its processes were killed by the next daemon'
        : 'the daemon stopped before the task started'
      await store.save(markFailed(task, reason, now))
    }
  }
  if (killed > 0 || interrupted.length > 0) log.warn({ lost: interrupted.length, killed }, 'interrupted tasks recovered')
  return { loaded, corrupt: corrupt.size, lost: interrupted.length, killed }
}

/** A folder holding nothing but an empty output.log (or nothing at all), and no task.json. */
async function isUnfinishedCreation(spoolRoot: string, id: string): Promise<boolean> {
  const dir = dirname(recordPath(spoolRoot, id))
  const names = await readdir(dir).catch(() => null)
  if (names === null || names.some((name) => name !== 'output.log')) return false
  return names.length === 0 || (await outputSize(outputPath(spoolRoot, id))) === 0
}
