// The record writer's thread: writes each task.json whole (temporary file, fsync, rename). The
// quick calls are plain blocking ones; the fsync, the slow part, goes to libuv's thread pool, so
// the fsyncs of different tasks overlap while this thread, not the daemon's, does the rest.
import { closeSync, fsync, mkdirSync, openSync, renameSync, writeFileSync, writeSync } from 'node:fs'
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

function write(job: RecordJob): void {
  let fd: number
  let temporary: string
  try {
    if (job.createDir) {
      mkdirSync(job.dir, { recursive: true, mode: 0o700 })
      // output.log exists from the start, so readers find an empty log rather than none.
      writeFileSync(job.outputFile, '', { flag: 'a', mode: 0o600 })
    }
    counter += 1
    temporary = `${job.target}.${process.pid}-${counter}.tmp`
    fd = openSync(temporary, 'w', 0o600)
  } catch (error) {
    failed(job, error)
    return
  }
  try {
    writeSync(fd, job.text)
  } catch (error) {
    closeSync(fd)
    failed(job, error)
    return
  }
  fsync(fd, (syncError) => {
    try {
      closeSync(fd)
      if (syncError) throw syncError
      renameSync(temporary, job.target)
      answer({ seq: job.seq })
    } catch (error) {
      failed(job, error)
    }
  })
}

parentPort!.on('message', (jobs: RecordJob[]) => {
  for (const job of jobs) write(job)
})
