import type { Logger } from 'pino'
import { isFinished, TendError, type Task } from '../../protocol/index.js'
import { lstatSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { entryBytesSync, OUTPUT_FILE, outputAllocatedBytesSync, RECORD_FILE, removeSpoolEntry, removeTaskDir, spoolFolders } from '../../spool/index.js'
import { outputDiskCeilingBytes } from '../tasks/output/output-cap.js'
import type { CorruptEntries } from './corrupt-entries.js'
import type { TaskStore } from './task-store.js'

/** Room a task's record takes besides its output, for quota arithmetic. */
const RECORD_OVERHEAD_BYTES = 1024

/**
 * How long an entry that is no task must have gone unchanged before the quota removes it, by its
 * kernel ctime (which no task can set back, unlike its mtime): a task may rename its folder away
 * and back, and what it is still changing is in use. The operator's gc does not wait.
 */
export const STRAY_GRACE_MS = 5 * 60_000

interface Stray {
  name: string
  bytes: number
  /** Its ctime in ms: the last change to the entry itself (a rename, an entry made in it). */
  changedMs: number
}

/**
 * Deletes finished tasks and corrupt spool entries: on request, by age, and when the spool passes
 * its quota. Its arithmetic counts what each output takes on disk, its allocated blocks, never the
 * size a record states or the logical size of the file: a task can make its output.log as large
 * as it likes without writing it (ftruncate: a sparse file), and that must not evict anyone.
 */
/** What mkfs makes at the top of an ext2/3/4 file system: fsck's, never a task's. */
const FILE_SYSTEM_FOLDER = 'lost+found'

export class SpoolCleanup {
  /**
   * Disk use of finished tasks' and corrupt entries' outputs, measured once (nothing writes them
   * any more); a running task's is measured on every pass.
   */
  private readonly settledBytes = new Map<string, number>()

  constructor(
    private readonly spoolRoot: string,
    private readonly quotaBytes: number,
    private readonly store: TaskStore,
    private readonly corrupt: CorruptEntries,
    private readonly log: Logger,
    /** Runs before a task's folder goes: keeps what must outlive it (its idempotency key). */
    private readonly beforeRemoval: (task: Task) => Promise<void> = async () => {},
    /** Kills what still runs of a corrupt entry before its folder goes (its processes are unreachable after). Default: nothing. */
    private readonly stopLeftovers: (id: string) => Promise<unknown> = async () => undefined,
  ) {}

  /** Removes a finished task or a corrupt entry; a queued or running task is refused. */
  async remove(id: string): Promise<number> {
    const entry = this.corrupt.find(id)
    if (entry) return this.removeEntry(entry)
    const task = this.store.get(id)
    if (!isFinished(task)) throw new TendError('TEND_ERR_TASK_NOT_FINISHED', { id, state: task.state })
    return this.removeEntry(task)
  }

  /**
   * Removes finished tasks that ended more than olderThanMs ago, and every corrupt entry whatever
   * its age: it has no end time to trust, and nothing will make it readable again.
   */
  async removeOlderThan(olderThanMs: number, owner: string | null = null, now = Date.now()): Promise<{ removed: string[]; freedBytes: number }> {
    const cutoff = now - olderThanMs
    const old = this.store
      .list({ all: true, owner: owner ?? undefined })
      .filter((task) => isFinished(task) && task.endedAt !== null && Date.parse(task.endedAt) <= cutoff)
    const result = await this.removeAll([...this.corrupt.list(owner), ...old])
    // A stray entry has no owner: only the operator's gc removes it.
    if (owner === null) await this.removeStrays(this.strays(), result)
    return result
  }

  /**
   * Entries of the spool that are no task's folder and no corrupt entry: a task folder renamed away
   * by its task, anything else put there. Named and measured (every file under them, links not
   * followed); a folder being made for a new task is not one (the spool's folders know it).
   */
  strayEntries(): Array<{ name: string; bytes: number }> {
    return this.strays().map(({ name, bytes }) => ({ name, bytes }))
  }

  private strays(): Stray[] {
    const folders = spoolFolders(this.spoolRoot)
    let names: string[]
    try {
      names = readdirSync(folders.root())
    } catch {
      return []
    }
    const strays: Stray[] = []
    for (const name of names.filter((each) => this.isStray(each)).sort()) {
      const changedMs = this.changedMs(name)
      if (changedMs !== null) strays.push({ name, bytes: entryBytesSync(join(folders.root(), name)), changedMs })
    }
    return strays
  }

  /**
   * No task of the store, no corrupt entry, no folder the daemon is making or removing; and not the
   * file system's own `lost+found` (a spool on a disk of its own has one at its top).
   */
  private isStray(name: string): boolean {
    if (name === FILE_SYSTEM_FOLDER) return false
    return !this.store.find(name) && !this.corrupt.find(name) && !spoolFolders(this.spoolRoot).isKnown(name)
  }

  /** The entry's ctime (lstat: a link is not followed), null when it is gone. */
  private changedMs(name: string): number | null {
    try {
      return lstatSync(join(spoolFolders(this.spoolRoot).root(), name)).ctimeMs
    } catch {
      return null
    }
  }

  /**
   * Removes each stray that still is one when its turn comes; with `unchangedSince`, only one the
   * kernel says has not changed since then. Answers the bytes they held.
   */
  private async removeStrays(strays: Stray[], result: { removed: string[]; freedBytes: number }, unchangedSince?: number): Promise<number> {
    let counted = 0
    for (const { name, bytes } of strays) {
      if (!this.isStray(name)) continue
      if (unchangedSince !== undefined && (this.changedMs(name) ?? Number.POSITIVE_INFINITY) > unchangedSince) continue
      try {
        result.freedBytes += await removeSpoolEntry(this.spoolRoot, name)
        result.removed.push(name)
        counted += bytes
        this.log.warn({ entry: name }, 'stray spool entry removed (no task of this daemon)')
      } catch (error) {
        this.log.error({ entry: name, err: error }, 'stray spool entry could not be removed')
      }
    }
    return counted
  }

  /** Bytes the spool takes on disk: each task's and corrupt entry's output (allocated blocks), plus its record. */
  usedBytes(strays: Array<{ bytes: number }> = this.strays()): number {
    let used = 0
    for (const entry of this.entries()) used += this.bytesOf(entry)
    for (const stray of strays) used += stray.bytes
    return used
  }

  /**
   * Deletes until the spool fits its quota: corrupt entries first (unreadable, they are worth less
   * than any task that can still be shown), then the finished tasks that ended first. Never touches
   * a running or queued task. Before them, stray entries unchanged for STRAY_GRACE_MS: no task can
   * be shown from them. A younger one counts, and stays.
   */
  async enforceQuota(now = Date.now()): Promise<string[]> {
    const strays = this.strays()
    let used = this.usedBytes(strays)
    if (used <= this.quotaBytes) return []
    const result = { removed: [] as string[], freedBytes: 0 }
    const unchangedSince = now - STRAY_GRACE_MS
    used -= await this.removeStrays(
      strays.filter((stray) => stray.changedMs <= unchangedSince),
      result,
      unchangedSince,
    )
    const finished = this.store
      .list({ all: true })
      .filter(isFinished)
      .sort((a, b) => endTime(a) - endTime(b) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    const victims: Task[] = []
    for (const entry of [...this.corrupt.list(), ...finished]) {
      if (used <= this.quotaBytes) break
      victims.push(entry)
      used -= this.bytesOf(entry)
    }
    const { removed, freedBytes } = await this.removeAll(victims)
    this.log.warn(
      { removed: removed.length + result.removed.length, freedBytes: freedBytes + result.freedBytes, quotaBytes: this.quotaBytes },
      'spool quota enforced',
    )
    return [...result.removed, ...removed]
  }

  private entries(): Task[] {
    return [...this.corrupt.list(), ...this.store.list({ all: true })]
  }

  /**
   * What an entry counts for: its output's allocated blocks (lstat: no link followed) and its
   * record. A running task counts for no more than its output may take (outputDiskCeilingBytes):
   * whatever it allocates past that (posix_fallocate up to its file-size limit, between two polls
   * of the cap) is cut off when the cap stops it, and must not evict anyone meanwhile.
   */
  private bytesOf(task: Task): number {
    const settled = this.settledBytes.get(task.id)
    if (settled !== undefined) return settled
    // Every file in the folder counts, at any depth (a task can write beside its output, in subfolders).
    const folder = join(spoolFolders(this.spoolRoot).root(), task.id)
    const allocated = outputAllocatedBytesSync(join(folder, OUTPUT_FILE))
    const others = entryBytesSync(folder, new Set([OUTPUT_FILE, RECORD_FILE]))
    const finished = isFinished(task) || task.state === 'corrupt'
    const bytes = (finished ? allocated : Math.min(allocated, outputDiskCeilingBytes(task.maxOutputBytes))) + others + RECORD_OVERHEAD_BYTES
    if (finished) this.settledBytes.set(task.id, bytes)
    return bytes
  }

  /** Removes each entry in turn; one that cannot be removed is logged and the others still go. */
  private async removeAll(entries: Task[]): Promise<{ removed: string[]; freedBytes: number }> {
    const removed: string[] = []
    let freedBytes = 0
    for (const entry of entries) {
      try {
        freedBytes += await this.removeEntry(entry)
        removed.push(entry.id)
      } catch (error) {
        this.log.error({ taskId: entry.id, err: error }, 'spool entry could not be removed')
      }
    }
    return { removed, freedBytes }
  }

  private async removeEntry(entry: Task): Promise<number> {
    // A task is forgotten first, so that nothing reads it while its files go; a corrupt entry
    // stays listed until its files are gone, so that a failed removal can be retried.
    if (entry.state !== 'corrupt') {
      // Its last record may still be on its way to disk: removing the folder under it would fail.
      await this.store.settled(entry.id)
      // A full disk must not keep the operator from freeing space: the key then lives on in memory only.
      await this.beforeRemoval(entry).catch((error: unknown) =>
        this.log.error({ taskId: entry.id, err: error }, 'idempotency key of a removed task not recorded'),
      )
      this.store.forget(entry.id)
    }
    if (entry.state === 'corrupt') await this.stopLeftovers(entry.id)
    let freedBytes: number
    try {
      freedBytes = await removeTaskDir(this.spoolRoot, entry.id)
    } catch (error) {
      throw new TendError('TEND_ERR_SPOOL_IO', { detail: `removing the spool entry ${entry.id}: ${(error as Error).message}` }, { cause: error })
    }
    this.settledBytes.delete(entry.id)
    this.store.roomFreed()
    if (entry.state === 'corrupt') {
      this.corrupt.forget(entry.id)
      this.log.warn({ taskId: entry.id, reason: entry.reason }, 'corrupt spool entry removed')
    }
    return freedBytes
  }
}

/** When a finished task ended, in ms; 0 when unknown (so it goes first). */
function endTime(task: Task): number {
  const time = task.endedAt === null ? Number.NaN : Date.parse(task.endedAt)
  return Number.isFinite(time) ? time : 0
}
