import { rmSync } from 'node:fs'
import { SCHEMA_VERSION, type Task, type TaskRecord } from '../../protocol/index.js'
import { renameIntoPlaceSync } from '../../protocol/home-file.js'
import { OUTPUT_FILE, RECORD_FILE, releaseSpoolFolders, spoolFolders, type OpenFolder } from '../../spool/index.js'
import { loadDurableWriter, type DurableWriter } from '../durable-write/durable-write.js'

/** One task.json version on its way to disk. */
interface RecordJob {
  seq: number
  /** Create the task's folder (0700) and an empty output.log first. */
  createDir: boolean
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
 * Two: their fsyncs overlap in the thread pool and they are renamed in order, so a version made
 * while the one before it is being synced lands one fsync later, not two (a quick task's ended
 * record behind its running record). Versions made meanwhile are coalesced into the newest.
 */
const MAX_IN_FLIGHT = 2

/**
 * Writes task.json files whole: a temporary file written to its last byte, fsynced and closed in
 * one job of libuv's thread pool (daemon/durable-write), then renamed over the record. The
 * daemon's thread only starts the job and renames: the fsyncs of different tasks overlap in the
 * pool. A task has at most two writes in flight, renamed in order; versions made meanwhile are
 * coalesced into the newest, so a busy disk writes fewer intermediate records, never an older
 * record over a newer one. A write's promise resolves once its version, or a newer one, is on disk.
 *
 * Measured against the worker thread this replaces (docs/benchmarks.md): the same spawn rate and
 * a quicker round trip without the thread's own V8 isolate (~11 MiB of resident memory).
 */
export class RecordWriter {
  private seq = 0
  private counter = 0
  private readonly tasks = new Map<string, TaskWrites>()
  /** Per task, the end of the newest write of its record: a version is renamed only after the one before it. */
  private readonly lastWrites = new Map<string, Promise<void>>()
  private idle: Promise<void> = Promise.resolve()
  private markIdle: () => void = () => {}
  private readonly durable: DurableWriter

  constructor(
    private readonly spoolRoot: string,
    durable: DurableWriter = loadDurableWriter(),
  ) {
    this.durable = durable
  }

  /** How records reach the disk: 'addon', or 'fs' when the addon was not built (with the reason). */
  get via(): Pick<DurableWriter, 'via' | 'reason'> {
    return { via: this.durable.via, reason: this.durable.reason }
  }

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
      text: `${JSON.stringify(record, null, 2)}\n`,
    }
    if (this.tasks.size === 0) this.idle = new Promise((resolve) => (this.markIdle = resolve))
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject }
      const writes = this.tasks.get(task.id)
      if (!writes) {
        this.tasks.set(task.id, { inFlight: [{ seq: job.seq, waiters: [waiter] }], next: null })
        this.start(task.id, job)
        return
      }
      if (!writes.next && writes.inFlight.length < MAX_IN_FLIGHT) {
        writes.inFlight.push({ seq: job.seq, waiters: [waiter] })
        this.start(task.id, job)
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

  /** Tasks whose folder is being made: a later version opens it once it is there. */
  private readonly making = new Map<string, Promise<void>>()

  /** Flushes, then lets go of the spool's descriptor (spool/task-folders.ts). */
  async close(): Promise<void> {
    await this.flush()
    releaseSpoolFolders(this.spoolRoot)
  }

  /** Writes the version to a temporary file, then renames it into place after the version before it. */
  private start(id: string, job: RecordJob): void {
    const previous = this.lastWrites.get(id)
    let markDone!: () => void
    const mine = new Promise<void>((resolve) => (markDone = resolve))
    this.lastWrites.set(id, mine)
    const done = () => {
      markDone()
      if (this.lastWrites.get(id) === mine) this.lastWrites.delete(id)
    }
    // The folder by its descriptor (spool/task-folders.ts): a folder the task replaced is this
    // task's write failing, never a write through its link or into another folder. It is made on
    // the thread pool (the daemon's thread does not wait on the disk), and a later version of the
    // same task opens it once that is done.
    const folders = spoolFolders(this.spoolRoot)
    const making = this.making.get(id)
    if (!job.createDir && !making) {
      let folder: OpenFolder
      try {
        folder = folders.open(id)
      } catch (error) {
        void Promise.resolve().then(async () => {
          this.settle(id, job.seq, error as Error)
          await previous
          done()
        })
        return
      }
      return this.writeIn(id, job, folder, previous, done)
    }
    const opened = job.createDir ? folders.makeOnPool(id) : making!.then(() => folders.open(id))
    if (job.createDir) {
      const made = opened.then(
        () => undefined,
        () => undefined,
      )
      this.making.set(id, made)
      void made.then(() => this.making.get(id) === made && this.making.delete(id))
    }
    opened.then(
      (folder) => this.writeIn(id, job, folder, previous, done),
      async (error: Error) => {
        this.settle(id, job.seq, error)
        await previous
        done()
      },
    )
  }

  /** The version written into the task's open folder, then renamed into place after the one before it. */
  private writeIn(id: string, job: RecordJob, folder: OpenFolder, previous: Promise<void> | undefined, done: () => void): void {
    const target = folder.file(RECORD_FILE)
    const temporary = `${target}.${process.pid}-${++this.counter}.tmp`
    const made = job.createDir ? { dir: folder.path, outputFile: folder.file(OUTPUT_FILE) } : null
    this.durable.write({ path: temporary, text: job.text, folder: made }).then(
      async () => {
        await previous
        try {
          // A folder a task put in the record's place is moved aside (removed with the task's folder).
          renameIntoPlaceSync(temporary, target)
        } catch (error) {
          // The task.json already there stays as it was, and the temporary file goes.
          rmSync(temporary, { force: true })
          folder.close()
          this.settle(id, job.seq, error as Error)
          return done()
        }
        folder.close()
        this.settle(id, job.seq, null)
        done()
      },
      // A failed write has removed its temporary file; the task.json already there stays as it was.
      async (error: Error) => {
        folder.close()
        this.settle(id, job.seq, error)
        await previous
        done()
      },
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
      this.start(id, job)
    }
    if (writes.inFlight.length === 0) this.tasks.delete(id)
    if (this.tasks.size === 0) this.markIdle()
  }
}
