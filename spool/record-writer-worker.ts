// The record writer's thread: writes each task.json whole (temporary file, fsync, rename), one job
// at a time in the order they arrive, with plain blocking calls that cost the daemon's thread nothing.
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, writeFileSync, writeSync } from 'node:fs'
import { parentPort } from 'node:worker_threads'
import type { RecordJob, RecordJobResult } from './record-writer.js'

let counter = 0

function run(job: RecordJob): void {
  if (job.createDir) {
    mkdirSync(job.dir, { recursive: true, mode: 0o700 })
    // output.log exists from the start, so readers find an empty log rather than none.
    writeFileSync(job.outputFile, '', { flag: 'a', mode: 0o600 })
  }
  counter += 1
  const temporary = `${job.target}.${process.pid}-${counter}.tmp`
  const fd = openSync(temporary, 'w', 0o600)
  try {
    writeSync(fd, job.text)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  renameSync(temporary, job.target)
}

parentPort!.on('message', (job: RecordJob) => {
  let result: RecordJobResult
  try {
    run(job)
    result = { seq: job.seq }
  } catch (error) {
    const { message, code } = error as NodeJS.ErrnoException
    result = { seq: job.seq, error: { message, code } }
  }
  parentPort!.postMessage(result)
})
