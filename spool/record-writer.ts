import { close, fsync, mkdir, open, rename, unlink, write, writeFile } from 'node:fs'
import { promisify } from 'node:util'
import { SCHEMA_VERSION, type Task, type TaskRecord } from '../protocol/index.js'
import { outputPath, recordPath, taskDir } from './layout.js'

// The callback forms, promisified: no FileHandle objects to track, each call is one request to
// libuv's thread pool.
const mkdirAsync = promisify(mkdir)
const writeFileAsync = promisify(writeFile)
const openAsync = promisify(open)
const writeAsync = promisify(write)
const fsyncAsync = promisify(fsync)
const closeAsync = promisify(close)
const renameAsync = promisify(rename)
const unlinkAsync = promisify(unlink)
const ignore = () => undefined

/** One task.json write. */
interface RecordJob {
  seq: number
  /** Create the task's folder (0700) and an empty output.log first. */
  createDir: boolean
  dir: string
  outputFile: string
  target: string
  text: string
}

interface Waiter {
  resolve: () => void
  reject: (error: Error) => void
}

/** A task's writes: at most MAX_IN_FLIGHT in flight, oldest first, and the newest version waiting behind them. */
interface TaskWrites {
  inFlight: Array<{ seq: number; waiters: Waiter[] }>
  next: { job: RecordJob; waiters: Waiter[] } | null
}

/**
 * The steps of the newest write to a record file that the next write to it waits for; neither
 * promise ever rejects.
 */
interface WriteSteps {
  /** Its temporary file is written (the task's folder made first when asked). */
  prepared: Promise<void>
  /** It is renamed into place, or has failed, and so has every write before it. */
  done: Promise<void>
}

/**
 * Two: their fsyncs overlap and they are renamed in order, so a version made while the one before
 * it is being synced lands one fsync later, not two (a quick task's ended record behind its
 * running record). Versions made meanwhile are coalesced into the newest.
 */
const MAX_IN_FLIGHT = 2

/**
 * Writes task.json files, each whole (temporary file, fsync, rename), never blocking the daemon's
 * thread: every file system call (folder, output.log, open, write, fsync, close, rename) is a
 * request to libuv's thread pool, so the slow parts (inode allocation on a churned ext4, the
 * fsync) run there and the fsyncs of different tasks overlap. A task has at most two writes in
 * flight (renamed in order); versions made meanwhile are coalesced into the newest, so a busy disk
 * writes fewer intermediate records, never an older record over a newer one. A write's promise
 * resolves once its version, or a newer one, is on disk.
 *
 * Not a worker thread doing the calls blocking: a thread is a V8 isolate of its own (~8-11 MiB
 * resident) and bought no speed over this (docs/benchmarks.md, "A light daemon").
 */
export class RecordWriter {
  private seq = 0
  private counter = 0
  private readonly tasks = new Map<string, TaskWrites>()
  private readonly lastWrites = new Map<string, WriteSteps>()
  private idle: Promise<void> = Promise.resolve()
  private markIdle: () => void = () => {}

  constructor(private readonly spoolRoot: string) {}

  /** Nothing to start: kept so callers need not know how writes are done. */
  start(): void {}

  /**
   * Writes the task's record; with createDir, makes its folder and empty output.log first. A
   * failed write rejects with the file system's error and its `code` (ENOSPC when the disk is
   * full), leaving the task.json that was there untouched and no temporary file behind.
   */
  write(task: Task, options: { createDir?: boolean } = {}): Promise<void> {
    // A corrupt entry is never written: its record stays as it was found.
    if (task.state === 'corrupt') return Promise.reject(new Error(`task ${task.id} is a corrupt spool entry: it has no record to write`))
    const record: TaskRecord = { schemaVersion: SCHEMA_VERSION, ...task }
    const job: RecordJob = {
      seq: ++this.seq,
      createDir: options.createDir === true,
      dir: taskDir(this.spoolRoot, task.id),
      outputFile: outputPath(this.spoolRoot, task.id),
      target: recordPath(this.spoolRoot, task.id),
      text: `${JSON.stringify(record, null, 2)}\n`,
    }
    if (this.tasks.size === 0) this.idle = new Promise((resolve) => (this.markIdle = resolve))
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject }
      const writes = this.tasks.get(task.id)
      if (!writes) {
        this.tasks.set(task.id, { inFlight: [{ seq: job.seq, waiters: [waiter] }], next: null })
        this.run(task.id, job)
        return
      }
      if (!writes.next && writes.inFlight.length < MAX_IN_FLIGHT) {
        writes.inFlight.push({ seq: job.seq, waiters: [waiter] })
        this.run(task.id, job)
        return
      }
      // A folder still to be made must be made by whichever write goes first.
      if (writes.next) writes.next = { job: { ...job, createDir: job.createDir || writes.next.job.createDir }, waiters: [...writes.next.waiters, waiter] }
      else writes.next = { job, waiters: [waiter] }
    })
  }

  /** Resolves once every write asked for so far has landed (or failed). */
  flush(): Promise<void> {
    return this.idle
  }

  async close(): Promise<void> {
    await this.flush()
  }

  private run(id: string, job: RecordJob): void {
    this.counter += 1
    const temporary = `${job.target}.${process.pid}-${this.counter}.tmp`
    const previous = this.lastWrites.get(job.target)
    let markPrepared!: () => void
    const prepared = new Promise<void>((resolve) => (markPrepared = resolve))
    const written = writeRecord(job, temporary, previous, markPrepared)
    const steps: WriteSteps = { prepared, done: written.then(ignore, ignore).then(() => previous?.done) }
    this.lastWrites.set(job.target, steps)
    void steps.done.then(() => {
      if (this.lastWrites.get(job.target) === steps) this.lastWrites.delete(job.target)
    })
    written.then(
      () => this.settle(id, job.seq, null),
      (error: NodeJS.ErrnoException) => this.settle(id, job.seq, Object.assign(new Error(error.message), { code: error.code })),
    )
  }

  private settle(id: string, seq: number, error: Error | null): void {
    const writes = this.tasks.get(id)
    if (!writes) return
    const index = writes.inFlight.findIndex((each) => each.seq === seq)
    const [settled] = index === -1 ? [] : writes.inFlight.splice(index, 1)
    for (const waiter of settled?.waiters ?? []) {
      if (error) waiter.reject(error)
      else waiter.resolve()
    }
    if (writes.next && writes.inFlight.length < MAX_IN_FLIGHT) {
      const { job, waiters } = writes.next
      writes.next = null
      writes.inFlight.push({ seq: job.seq, waiters })
      this.run(id, job)
    }
    if (writes.inFlight.length === 0) this.tasks.delete(id)
    if (this.tasks.size === 0) this.markIdle()
  }
}

/**
 * One record, whole: a temporary file written to its last byte, fsynced, renamed. Its file is made
 * only after the previous write's (whose job may be making the folder), its fsync overlaps the
 * previous one's, and it is renamed only after the previous write is done: an older version never
 * replaces a newer one. Whatever fails, the temporary file goes and the task.json already there
 * stays as it was.
 */
async function writeRecord(job: RecordJob, temporary: string, previous: WriteSteps | undefined, markPrepared: () => void): Promise<void> {
  let fd: number | undefined
  try {
    try {
      await previous?.prepared
      if (job.createDir) {
        await mkdirAsync(job.dir, { recursive: true, mode: 0o700 })
        // output.log exists from the start, so readers find an empty log rather than none.
        await writeFileAsync(job.outputFile, '', { flag: 'a', mode: 0o600 })
      }
      fd = await openAsync(temporary, 'w', 0o600)
      await writeAll(fd, Buffer.from(job.text))
    } finally {
      markPrepared()
    }
    await fsyncAsync(fd)
    const synced = fd
    fd = undefined
    await closeAsync(synced)
    await previous?.done
    await renameAsync(temporary, job.target)
  } catch (error) {
    // The write has failed already; that error is the one to report.
    if (fd !== undefined) await closeAsync(fd).catch(ignore)
    await unlinkAsync(temporary).catch(ignore)
    throw error
  }
}

/** write(2) may write less than asked (a disk filling up): go on until every byte is written or a write fails. */
async function writeAll(fd: number, bytes: Buffer): Promise<void> {
  let offset = 0
  while (offset < bytes.length) {
    const { bytesWritten } = await writeAsync(fd, bytes, offset, bytes.length - offset)
    if (bytesWritten <= 0) throw Object.assign(new Error(`EIO: the write stopped at byte ${offset} of ${bytes.length}`), { code: 'EIO' })
    offset += bytesWritten
  }
}
