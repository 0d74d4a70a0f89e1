import { Worker } from 'node:worker_threads'
import { SCHEMA_VERSION, type Task, type TaskRecord } from '../protocol/index.js'
import { outputPath, recordPath, taskDir } from './layout.js'

/** One task.json write, as the worker gets it. */
export interface RecordJob {
  seq: number
  /** Create the task's folder (0700) and an empty output.log first. */
  createDir: boolean
  dir: string
  outputFile: string
  target: string
  text: string
}

export interface RecordJobResult {
  seq: number
  error?: { message: string; code?: string }
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
 * Two: the worker overlaps their fsyncs and renames them in order, so a version made while the one
 * before it is being synced lands one fsync later, not two (a quick task's ended record behind its
 * running record). Versions made meanwhile are coalesced into the newest.
 */
const MAX_IN_FLIGHT = 2

/**
 * Writes task.json files on a worker thread: each whole (temporary file, fsync, rename). The
 * daemon's thread only posts the record and gets a promise; the calls and the fsync waits happen
 * off it (the fsyncs of different tasks overlap in libuv's thread pool). A task has at most two
 * writes in flight (renamed in order); versions made meanwhile are coalesced into the newest, so a
 * busy disk writes fewer intermediate records, never an older record over a newer one. A write's promise resolves
 * once its version, or a newer one, is on disk. Writes made in one turn of the event loop are
 * posted together, and answered together: one wake-up each way, not one per write.
 *
 * Measured with 500 quick tasks against a plain spawn loop (docs/benchmarks.md): this thread
 * with the fsyncs in the pool 0.77-0.78x; one thread doing every call blocking 0.59x, four such
 * threads 0.74-0.77x at ~20 MiB more memory.
 */
export class RecordWriter {
  private worker: Worker | null = null
  private seq = 0
  private readonly tasks = new Map<string, TaskWrites>()
  /** Jobs posted and not answered yet, and the task of each. */
  private readonly posted = new Map<number, string>()
  private batch: RecordJob[] = []
  private idle: Promise<void> = Promise.resolve()
  private markIdle: () => void = () => {}

  constructor(private readonly spoolRoot: string) {}

  /** Starts the thread now, so the first writes do not wait for it to boot. */
  start(): void {
    this.ensureWorker()
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
        this.post(task.id, job)
        return
      }
      if (!writes.next && writes.inFlight.length < MAX_IN_FLIGHT) {
        writes.inFlight.push({ seq: job.seq, waiters: [waiter] })
        this.post(task.id, job)
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
    const worker = this.worker
    this.worker = null
    await worker?.terminate()
  }

  private post(id: string, job: RecordJob): void {
    // Referenced while it has work, so a pending write keeps the process alive until it lands.
    if (this.posted.size === 0) this.ensureWorker().ref()
    this.posted.set(job.seq, id)
    this.batch.push(job)
    if (this.batch.length > 1) return
    setImmediate(() => {
      const batch = this.batch
      this.batch = []
      this.ensureWorker().postMessage(batch)
    })
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker
    const worker = new Worker(new URL('./record-writer-worker.js', import.meta.url), {
      // It only receives strings and calls fs: a small heap keeps its memory small.
      resourceLimits: { maxYoungGenerationSizeMb: 1, maxOldGenerationSizeMb: 16 },
    })
    worker.on('message', (results: RecordJobResult[]) => {
      for (const result of results) this.settle(result)
    })
    // A dead worker fails what it had, and the next write starts a new one.
    const fail = (error: Error) => {
      if (this.worker === worker) this.worker = null
      for (const seq of [...this.posted.keys()]) this.settle({ seq, error: { message: `record writer stopped: ${error.message}` } })
    }
    worker.on('error', fail)
    worker.on('exit', (code) => fail(new Error(`exit code ${code}`)))
    worker.unref()
    this.worker = worker
    return worker
  }

  private settle(result: RecordJobResult): void {
    const id = this.posted.get(result.seq)
    if (id === undefined) return
    this.posted.delete(result.seq)
    if (this.posted.size === 0) this.worker?.unref()
    const writes = this.tasks.get(id)
    if (!writes) return
    const error = result.error ? Object.assign(new Error(result.error.message), { code: result.error.code }) : null
    const index = writes.inFlight.findIndex((each) => each.seq === result.seq)
    const [settled] = index === -1 ? [] : writes.inFlight.splice(index, 1)
    for (const waiter of settled?.waiters ?? []) {
      if (error) waiter.reject(error)
      else waiter.resolve()
    }
    if (writes.next && writes.inFlight.length < MAX_IN_FLIGHT) {
      const { job, waiters } = writes.next
      writes.next = null
      writes.inFlight.push({ seq: job.seq, waiters })
      this.post(id, job)
    }
    if (writes.inFlight.length === 0) this.tasks.delete(id)
    if (this.tasks.size === 0) this.markIdle()
  }
}
