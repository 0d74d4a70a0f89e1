// The record writer's thread: writes each task.json whole (temporary file, fsync, rename) with
// plain blocking calls that cost the daemon's thread nothing. Jobs come in batches; a batch is
// written as a group: every temporary file first, then the fsyncs (on a journaled file system the
// first commit carries the others, so the rest cost little), then the renames.
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, writeFileSync, writeSync } from 'node:fs'
import { parentPort } from 'node:worker_threads'
import type { RecordJob, RecordJobResult } from './record-writer.js'

let counter = 0

interface Open {
  job: RecordJob
  temporary: string
  fd: number
}

function writeTemporary(job: RecordJob): Open {
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
  } catch (error) {
    closeSync(fd)
    throw error
  }
  return { job, temporary, fd }
}

function failure(job: RecordJob, error: unknown): RecordJobResult {
  const { message, code } = error as NodeJS.ErrnoException
  return { seq: job.seq, error: { message, code } }
}

parentPort!.on('message', (jobs: RecordJob[]) => {
  const results: RecordJobResult[] = []
  const open: Open[] = []
  for (const job of jobs) {
    try {
      open.push(writeTemporary(job))
    } catch (error) {
      results.push(failure(job, error))
    }
  }
  const synced: Open[] = []
  for (const file of open) {
    try {
      fsyncSync(file.fd)
      synced.push(file)
    } catch (error) {
      results.push(failure(file.job, error))
    } finally {
      closeSync(file.fd)
    }
  }
  for (const file of synced) {
    try {
      renameSync(file.temporary, file.job.target)
      results.push({ seq: file.job.seq })
    } catch (error) {
      results.push(failure(file.job, error))
    }
  }
  parentPort!.postMessage(results)
})
