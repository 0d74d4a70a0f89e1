import { closeSync, openSync, readdirSync } from 'node:fs'
import { readProcStat } from '../../../protocol/index.js'
import { ProcBuffer } from './proc-buffer.js'

/**
 * The kernel's own process tree: /proc/<pid>/task/<tid>/children lists the children a thread
 * forked (space-separated pids), far cheaper than a pass over all of /proc.
 */

const proc = new ProcBuffer(4096)

/**
 * The children file of `pid`'s main thread, opened and then checked to be of the process started at
 * `startTicks` (a stat read after the open: had the pid been reused before it, the start time
 * differs). Held open, it keeps naming that process. -1 when it is not that process (or is gone).
 */
export function openChildren(pid: number, startTicks: number): number {
  let fd: number
  try {
    fd = openSync(`/proc/${pid}/task/${pid}/children`, 'r')
  } catch {
    return -1
  }
  if (Number(readProcStat(pid)?.startTime ?? -1) === startTicks) return fd
  closeSync(fd)
  return -1
}

/** Appends each child the held file lists as (child, parent) pairs onto `pending`; false once it cannot be read (its process ended). */
export function readChildren(fd: number, parent: number, pending: number[]): boolean {
  if (fd < 0) return false
  let length: number
  try {
    length = proc.read(fd)
  } catch {
    return false
  }
  let value = 0
  for (let at = 0; at < length; at++) {
    const byte = proc.bytes[at]!
    if (byte >= 48 && byte <= 57) value = value * 10 + byte - 48
    else if (value > 0) {
      pending.push(value, parent)
      value = 0
    }
  }
  if (value > 0) pending.push(value, parent)
  return true
}

/**
 * Appends `pid`'s children, of each of its `threads` threads (a child belongs to the thread that
 * forked it), as (child, parent) pairs onto `pending`. Each file is opened for this read only: the
 * caller has just checked, through a file that names the process, that `pid` is it.
 */
export function childrenOf(pid: number, threads: number, pending: number[]): void {
  let tids: readonly (string | number)[] = [pid]
  if (threads > 1) {
    try {
      tids = readdirSync(`/proc/${pid}/task`)
    } catch {
      return
    }
  }
  for (const tid of tids) {
    let fd: number
    try {
      fd = openSync(`/proc/${pid}/task/${tid}/children`, 'r')
    } catch {
      continue
    }
    try {
      readChildren(fd, pid, pending)
    } finally {
      closeSync(fd)
    }
  }
}
