// The record writer's thread: writes each task.json whole (a temporary file written to its last
// byte, fsynced, renamed; on any failure the temporary file is removed). The quick calls are plain
// blocking ones; the fsync, the slow part, goes to libuv's thread pool, so the fsyncs of different
// tasks overlap while this thread, not the daemon's, does the rest.
import { closeSync, fsync, mkdirSync, openSync, renameSync, unlinkSync, writeFileSync, writeSync } from 'node:fs'
import { parentPort } from 'node:worker_threads'
import type { RecordJob, RecordJobResult } from './record-writer.js'

let counter = 0
let answers: RecordJobResult[] = []
let answerScheduled = false

/** Answers go back together, once per turn of this thread's event loop. */
function answer(result: RecordJobResult): void {
  answers.push(result)
  if (answerScheduled) return
  answerScheduled = true
  setImmediate(() => {
    answerScheduled = false
    const batch = answers
    answers = []
    parentPort!.postMessage(batch)
  })
}

function failed(job: RecordJob, error: unknown): void {
  const { message, code } = error as NodeJS.ErrnoException
  answer({ seq: job.seq, error: { message, code } })
}

/**
 * Per record file, the end of the newest write to it. A write's fsync may overlap the one before it
 * (a quick task's ended record need not wait for its running record's fsync), but it is renamed into
 * place only once that one is done: an older version never replaces a newer one.
 */
const lastWrites = new Map<string, Promise<void>>()

function write(job: RecordJob): void {
  const previous = lastWrites.get(job.target)
  let markDone!: () => void
  const mine = new Promise<void>((resolve) => (markDone = resolve))
  lastWrites.set(job.target, mine)
  const done = () => {
    markDone()
    if (lastWrites.get(job.target) === mine) lastWrites.delete(job.target)
  }
  const afterPrevious = (step: () => void) => (previous ? void previous.then(step) : step())
  let fd: number | undefined
  let temporary: string | undefined
  // Whatever failed, the temporary file goes and the task.json already there stays as it was.
  const fail = (error: unknown) => {
    if (fd !== undefined) closeQuietly(fd)
    fd = undefined
    if (temporary !== undefined) unlinkQuietly(temporary)
    failed(job, error)
    afterPrevious(done)
  }
  try {
    if (job.createDir) {
      mkdirSync(job.dir, { recursive: true, mode: 0o700 })
      // output.log exists from the start, so readers find an empty log rather than none.
      writeFileSync(job.outputFile, '', { flag: 'a', mode: 0o600 })
    }
    counter += 1
    temporary = `${job.target}.${process.pid}-${counter}.tmp`
    fd = openSync(temporary, 'w', 0o600)
    writeAll(fd, Buffer.from(job.text))
  } catch (error) {
    fail(error)
    return
  }
  fsync(fd, (syncError) => {
    try {
      if (syncError) throw syncError
      const synced = fd!
      fd = undefined
      closeSync(synced)
    } catch (error) {
      fail(error)
      return
    }
    afterPrevious(() => {
      try {
        renameSync(temporary!, job.target)
      } catch (error) {
        fail(error)
        return
      }
      answer({ seq: job.seq })
      done()
    })
  })
}

/** write(2) may write less than asked (a disk filling up): go on until every byte is written or a write fails. */
function writeAll(fd: number, bytes: Buffer): void {
  let offset = 0
  while (offset < bytes.length) {
    const written = writeSync(fd, bytes, offset, bytes.length - offset)
    if (written <= 0) throw Object.assign(new Error(`EIO: the write stopped at byte ${offset} of ${bytes.length}`), { code: 'EIO' })
    offset += written
  }
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd)
  } catch {
    // The write has failed already; that error is the one to report.
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path)
  } catch {
    // Never created (the open failed), or gone already.
  }
}

parentPort!.on('message', (jobs: RecordJob[]) => {
  for (const job of jobs) write(job)
})
