import { writeSync } from 'node:fs'
import { pino } from 'pino'
import { openHomeFileSync } from '../protocol/home-file.js'

/** Where pino writes the daemon's log lines. */
export interface LogDestination {
  write: (line: string) => void
  /** True once daemon.log failed and lines go to stderr. */
  readonly failedOver: boolean
}

/**
 * daemon.log, falling back to the daemon's stderr (daemon.stderr when the CLI started it, else the
 * terminal or whatever its parent gave it) as soon as the file cannot be opened or written: disk
 * full, quota, i/o error. The failure is said once on stderr, then the line that failed and every
 * later one go there. It stays there until the daemon restarts, even once the disk has room again:
 * a log that moved once is easier to follow than one that moves back and forth. A line stderr
 * cannot take either is dropped; there is nowhere left to say so.
 *
 * The file is written synchronously (a line at a time, into the page cache). pino's asynchronous
 * file stream keeps unwritten lines in memory, throws a write failure as an unhandled 'error', and
 * on the way out retries those lines forever when the disk is full: the daemon then neither serves
 * nor exits, while its socket still accepts connections.
 */
export function createLogDestination(path: string, stderrFd = 2): LogDestination {
  let failedOver = false
  const toStderr = (line: string) => {
    try {
      writeSync(stderrFd, line)
    } catch {
      // stderr on the same full disk, or closed: the line is lost, the daemon goes on.
    }
  }
  /** Answers whether this was the first failure. */
  const failOver = (error: NodeJS.ErrnoException): boolean => {
    if (failedOver) return false
    failedOver = true
    const notice = {
      level: 50,
      time: Date.now(),
      pid: process.pid,
      path,
      err: { code: error.code, message: error.message },
      msg: 'daemon log file failed: logging to stderr until the daemon restarts',
    }
    toStderr(`${JSON.stringify(notice)}\n`)
    return true
  }

  let file: ReturnType<typeof pino.destination> | undefined
  try {
    // A task under `off` can replace daemon.log: a FIFO would block this open (and the home's
    // instance lock with it), a link would be written through. Opened as the home's own file, the
    // descriptor goes to pino.
    file = pino.destination({ fd: openHomeFileSync(path, { append: true }).fd, sync: true })
  } catch (error) {
    failOver(error as NodeJS.ErrnoException)
  }
  // pino re-emits every error but EPIPE, which would throw without a listener of ours.
  file?.on('error', (error: NodeJS.ErrnoException) => {
    if (failOver(error)) file!.destroy()
  })
  return {
    write: (line) => {
      if (failedOver || !file) return toStderr(line)
      file.write(line)
      // A synchronous stream fails inside write(): this line is the one that did not land (or only in part).
      if (failedOver) toStderr(line)
    },
    get failedOver() {
      return failedOver
    },
  }
}
