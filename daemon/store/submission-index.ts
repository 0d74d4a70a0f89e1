import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { unlink } from 'node:fs/promises'
import type { Logger } from 'pino'
import type { Task } from '../../protocol/index.js'
import { openRegularFileForWrite, readRegularFileSync, untrustedProblem } from '../../spool/index.js'
import { displaceSync, renameIntoPlace } from '../../protocol/home-file.js'
import { loadDurableWriter, type DurableWriter } from '../durable-write/durable-write.js'

/** In the spool's top folder; not a task id, so never listed as a task. */
export const SUBMISSION_INDEX_FILE = 'submissions.log'

/** How long a removed task's idempotency key is kept after its removal (docs/api.md). */
export const REMOVED_KEY_LIFETIME_MS = 7 * 24 * 3600 * 1000
/** At most this many removed tasks' keys are kept, the newest (docs/api.md). */
export const REMOVED_KEY_LIMIT = 10_000
/** The file is compacted (rewritten with only what is kept) once it holds this many lines. */
const COMPACT_AT_LINES = 2 * REMOVED_KEY_LIMIT
/** Past this the file is not what the daemon wrote: started afresh (logged). */
const MAX_FILE_BYTES = 64 * 1024 * 1024

/** A submission whose task was removed: what a retry with its key is answered. */
export interface RemovedSubmission {
  owner: string
  key: string
  requestHash: string
  id: string
  /** How the task ended, in words ("exited 0", "killed SIGTERM"). */
  outcome: string
  removedAt: string
}

/**
 * The idempotency keys of removed tasks. A key lives in its task's record while the task is in
 * the spool; a removal (rm, gc, the quota) would take it along, and a retry would run the command
 * again. So before a task with a key is removed, its key is appended here (JSON lines, fsynced),
 * and kept for REMOVED_KEY_LIFETIME_MS, at most REMOVED_KEY_LIMIT of them. A line torn by a crash
 * is skipped; the file is rewritten whole (temporary file, fsync, rename) when it has grown.
 */
export class SubmissionIndex {
  private readonly entries = new Map<string, RemovedSubmission>()
  private lines = 0
  private writes: Promise<void> = Promise.resolve()

  private constructor(
    private readonly path: string,
    private readonly durable: DurableWriter,
  ) {}

  /**
   * Reads the index of a home (none yet: empty); what cannot be read is logged and skipped. It lives
   * beside the spool, not in it: the spool holds task folders only, as readers of it expect.
   */
  static load(home: string, log: Logger, durable: DurableWriter = loadDurableWriter()): SubmissionIndex {
    const index = new SubmissionIndex(join(home, SUBMISSION_INDEX_FILE), durable)
    let text = ''
    try {
      text = readRegularFileSync(index.path, MAX_FILE_BYTES, { secondNames: true }).toString('utf8')
    } catch (error) {
      const problem = untrustedProblem(error)
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
        log.error({ err: error, path: index.path, problem }, "idempotency index unreadable: removed tasks' keys are forgotten")
      // Not a file (a folder, a FIFO, a link a task put there): moved aside, so the next key lands in a new one.
      if (isMisplaced(error)) displaceSync(index.path)
    }
    try {
      rmSync(`${index.path}.tmp`, { force: true })
    } catch {
      displaceSync(`${index.path}.tmp`)
    }
    // A line torn by a crash would swallow the next one appended: the next write rewrites the file.
    if (text !== '' && !text.endsWith('\n')) index.lines = COMPACT_AT_LINES
    const now = Date.now()
    for (const line of text.split('\n')) {
      if (line === '') continue
      index.lines++
      const entry = parseEntry(line)
      if (entry && now - Date.parse(entry.removedAt) < REMOVED_KEY_LIFETIME_MS) index.keep(entry)
    }
    return index
  }

  find(owner: string, key: string): RemovedSubmission | undefined {
    return this.entries.get(scoped(owner, key))
  }

  /** Records the key of a task about to be removed; resolves once it is on disk. */
  async retire(task: Task, now = new Date()): Promise<void> {
    if (!task.idempotencyKey || !task.requestHash) return
    const entry: RemovedSubmission = {
      owner: task.owner,
      key: task.idempotencyKey,
      requestHash: task.requestHash,
      id: task.id,
      outcome: outcomeOf(task),
      removedAt: now.toISOString(),
    }
    this.keep(entry)
    const write = this.writes.then(() =>
      this.lines + 1 >= COMPACT_AT_LINES ? this.compact() : this.append(entry).catch((error: unknown) => this.rewriteWhenMisplaced(error)),
    )
    this.writes = write.catch(() => {})
    await write
  }

  private keep(entry: RemovedSubmission): void {
    const key = scoped(entry.owner, entry.key)
    this.entries.delete(key)
    this.entries.set(key, entry)
    // A Map iterates in insertion order: the first entries are the oldest.
    for (const oldest of this.entries.keys()) {
      if (this.entries.size <= REMOVED_KEY_LIMIT) break
      this.entries.delete(oldest)
    }
  }

  private async append(entry: RemovedSubmission): Promise<void> {
    const handle = await openRegularFileForWrite(this.path, { append: true })
    try {
      await handle.write(`${JSON.stringify(entry)}\n`)
      await handle.datasync()
    } finally {
      await handle.close()
    }
    this.lines++
  }

  /**
   * A task under `off` can put a folder, a FIFO or a link where the index is: an append then fails
   * for good, and the key would live in memory only, lost at the next restart. What is there is
   * moved aside and the index written anew, from what this daemon keeps.
   */
  private async rewriteWhenMisplaced(error: unknown): Promise<void> {
    if (!isMisplaced(error)) throw error
    displaceSync(this.path)
    await this.compact()
  }

  private async compact(): Promise<void> {
    const now = Date.now()
    const kept = [...this.entries.values()].filter((entry) => now - Date.parse(entry.removedAt) < REMOVED_KEY_LIFETIME_MS)
    const temporary = `${this.path}.tmp`
    const text = kept.map((entry) => `${JSON.stringify(entry)}\n`).join('')
    try {
      // A fresh temporary unlinks what is at its name; a folder there cannot be, so it is moved aside.
      await this.durable.write({ path: temporary, text, folder: null }).catch(async (error: unknown) => {
        if ((error as NodeJS.ErrnoException).code !== 'EISDIR') throw error
        displaceSync(temporary)
        await this.durable.write({ path: temporary, text, folder: null })
      })
      await renameIntoPlace(temporary, this.path)
    } catch (error) {
      await unlink(temporary).catch(() => {})
      throw error
    }
    this.lines = kept.length
  }
}

/** Whether an open failed because something else than a regular file stands at the path. */
function isMisplaced(error: unknown): boolean {
  const { code } = error as NodeJS.ErrnoException
  return code === 'EFTYPE' || code === 'ELOOP' || code === 'EISDIR' || code === 'ENXIO'
}

/** How a finished task ended, in a few words. */
export function outcomeOf(task: Task): string {
  if (task.state === 'exited') return `exited ${task.exitCode}`
  if (task.signal) return `${task.state} ${task.signal}`
  return task.state
}

function scoped(owner: string, key: string): string {
  return `${owner}\0${key}`
}

function parseEntry(line: string): RemovedSubmission | null {
  try {
    const value = JSON.parse(line) as Record<string, unknown>
    const fields = ['owner', 'key', 'requestHash', 'id', 'outcome', 'removedAt'] as const
    if (fields.some((field) => typeof value[field] !== 'string') || Number.isNaN(Date.parse(value.removedAt as string))) return null
    return Object.fromEntries(fields.map((field) => [field, value[field]])) as unknown as RemovedSubmission
  } catch {
    return null
  }
}
