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

/**
 * Writes task.json files on a worker thread: each whole (temporary file, fsync, rename), in the
 * order they were asked for. The daemon's thread only posts the record and gets a promise; the
 * blocking calls and the fsync wait happen on the worker.
 */
export class RecordWriter {
  private worker: Worker | null = null
  private seq = 0
  private readonly pending = new Map<number, { resolve: () => void; reject: (error: Error) => void }>()
  private idle: Promise<void> = Promise.resolve()
  private markIdle: () => void = () => {}

  constructor(private readonly spoolRoot: string) {}

  /** Writes the task's record; with createDir, makes its folder and empty output.log first. */
  write(task: Task, options: { createDir?: boolean } = {}): Promise<void> {
    const record: TaskRecord = { schemaVersion: SCHEMA_VERSION, ...task }
    const seq = ++this.seq
    const job: RecordJob = {
      seq,
      createDir: options.createDir === true,
      dir: taskDir(this.spoolRoot, task.id),
      outputFile: outputPath(this.spoolRoot, task.id),
      target: recordPath(this.spoolRoot, task.id),
      text: `${JSON.stringify(record, null, 2)}\n`,
    }
    const worker = this.ensureWorker()
    if (this.pending.size === 0) {
      worker.ref()
      this.idle = new Promise((resolve) => (this.markIdle = resolve))
    }
    return new Promise((resolve, reject) => {
      this.pending.set(seq, { resolve, reject })
      worker.postMessage(job)
    })
  }

  /** Starts the thread now, so the first write does not wait for it to boot. */
  start(): void {
    this.ensureWorker()
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

  private ensureWorker(): Worker {
    if (this.worker) return this.worker
    const worker = new Worker(new URL('./record-writer-worker.js', import.meta.url))
    worker.on('message', (result: RecordJobResult) => this.settle(result))
    // A dead worker fails what it had, and the next write starts a new one.
    const fail = (error: Error) => {
      if (this.worker === worker) this.worker = null
      for (const seq of [...this.pending.keys()]) this.settle({ seq, error: { message: `record writer stopped: ${error.message}` } })
    }
    worker.on('error', fail)
    worker.on('exit', (code) => fail(new Error(`exit code ${code}`)))
    worker.unref()
    this.worker = worker
    return worker
  }

  private settle(result: RecordJobResult): void {
    const waiter = this.pending.get(result.seq)
    if (!waiter) return
    this.pending.delete(result.seq)
    if (result.error) waiter.reject(Object.assign(new Error(result.error.message), { code: result.error.code }))
    else waiter.resolve()
    if (this.pending.size === 0) {
      this.worker?.unref()
      this.markIdle()
    }
  }
}
