import { closeSync, openSync, readdirSync, readSync } from 'node:fs'

/**
 * Clock ticks per second of /proc's CPU times (USER_HZ): 100 on every Linux tend runs on (the
 * kernel's ABI fixes it for x86 and arm64 alike).
 */
export const CLOCK_TICKS_PER_SECOND = 100
/** Bytes of a page, for /proc's resident set (4 KiB on x86 and arm64's usual kernels). */
const PAGE_BYTES = 4096
/** Stat files held open per task: a tree larger than this has its other processes' files opened at each sample. */
const HELD_STATS_PER_TASK = 16

/** What a set of processes holds now: CPU time since each started (ticks) and resident memory. */
export interface ProcessFigures {
  cpuTicks: number
  residentBytes: number
}

/** One buffer for every read: the daemon's thread reads one file at a time. */
let buffer = Buffer.allocUnsafe(16 * 1024)

/**
 * A task's files that its samples read again and again, each opened once and read from its start
 * (pread) at every sample: its cgroup's process list, and its processes' /proc stat files. An open
 * /proc/<pid>/stat keeps naming the process it was opened for: once that one ends, reads fail, and
 * a later process given the same pid is never read through it. Close them when the task ends.
 */
export class TaskProcFiles {
  private membersFd: number | null = null
  private readonly stats = new Map<number, number>()

  /** `membersFile`: its cgroup's cgroup.procs (null without a cgroup). */
  constructor(private readonly membersFile: string | null) {}

  /** The pids its cgroup lists now; null without a cgroup, or when it cannot be read. */
  members(): number[] | null {
    if (this.membersFile === null) return null
    try {
      this.membersFd ??= openSync(this.membersFile, 'r')
      return parsePids(readWhole(this.membersFd))
    } catch {
      this.closeMembers()
      return null
    }
  }

  /**
   * The summed figures of `pids` (utime, stime and rss of each one's stat), counting only a process
   * that started no earlier than `notBeforeTicks` (the task's leader's start time): a pid that was
   * listed, then ended and was reused by a process older than the task cannot count. A pid that is
   * gone counts nothing. Files of pids no longer listed are closed.
   */
  figures(pids: readonly number[], notBeforeTicks: number): ProcessFigures {
    let cpuTicks = 0
    let residentBytes = 0
    const listed = new Set(pids)
    for (const [pid, fd] of this.stats)
      if (!listed.has(pid)) {
        closeQuietly(fd)
        this.stats.delete(pid)
      }
    for (const pid of pids) {
      const stat = this.statOf(pid, notBeforeTicks)
      if (!stat) continue
      cpuTicks += stat.cpuTicks
      residentBytes += stat.residentPages * PAGE_BYTES
    }
    return { cpuTicks, residentBytes }
  }

  close(): void {
    this.closeMembers()
    for (const fd of this.stats.values()) closeQuietly(fd)
    this.stats.clear()
  }

  /** A process's figures from its stat, through its held file when there is one. */
  private statOf(pid: number, notBeforeTicks: number): StatFigures | null {
    const held = this.stats.get(pid)
    if (held !== undefined) {
      try {
        return statFigures(readWhole(held))
      } catch {
        closeQuietly(held)
        this.stats.delete(pid)
        return null
      }
    }
    let fd: number
    try {
      fd = openSync(`/proc/${pid}/stat`, 'r')
    } catch {
      return null
    }
    let figures: StatFigures | null = null
    try {
      figures = statFigures(readWhole(fd))
    } catch {
      // ended between its listing and now
    }
    const ours = figures !== null && figures.startTicks >= notBeforeTicks
    if (ours && this.stats.size < HELD_STATS_PER_TASK) this.stats.set(pid, fd)
    else closeQuietly(fd)
    return ours ? figures : null
  }

  private closeMembers(): void {
    if (this.membersFd !== null) closeQuietly(this.membersFd)
    this.membersFd = null
  }
}

/** The figures of `pids`, each stat file opened and closed (for a one-off look: TaskProcFiles holds them). */
export function processFigures(pids: readonly number[], notBeforeTicks: number): ProcessFigures {
  const files = new TaskProcFiles(null)
  try {
    return files.figures(pids, notBeforeTicks)
  } finally {
    files.close()
  }
}

/** Every process's session id (field 6 of its stat): one pass over /proc, for tasks without a cgroup. */
export function sessionsOfAllProcesses(): Map<number, number[]> {
  const sessions = new Map<number, number[]>()
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return sessions
  }
  for (const entry of entries) {
    if (entry.charCodeAt(0) < 49 || entry.charCodeAt(0) > 57) continue
    const pid = Number(entry)
    let fields: string[]
    try {
      const fd = openSync(`/proc/${pid}/stat`, 'r')
      try {
        fields = fieldsOf(readWhole(fd))
      } finally {
        closeSync(fd)
      }
    } catch {
      continue
    }
    const session = Number(fields[3])
    const members = sessions.get(session)
    if (members) members.push(pid)
    else sessions.set(session, [pid])
  }
  return sessions
}

/**
 * A file of /proc or cgroupfs read from its start, whole (the buffer grows for a long process list).
 * Those fill a read as far as they have data: a short read is the end, and needs no second one.
 */
function readWhole(fd: number): string {
  let length = 0
  for (;;) {
    const space = buffer.length - length
    const read = readSync(fd, buffer, length, space, length)
    length += read
    if (read < space) break
    if (length === buffer.length) {
      const larger = Buffer.allocUnsafe(buffer.length * 2)
      buffer.copy(larger)
      buffer = larger
    }
  }
  return buffer.toString('latin1', 0, length)
}

interface StatFigures {
  /** utime + stime (fields 14 and 15). */
  cpuTicks: number
  /** starttime (field 22). */
  startTicks: number
  /** rss (field 24). */
  residentPages: number
}

/**
 * The figures of a /proc/<pid>/stat line, its numbers read where they stand (a thousand tasks a
 * second: no array of its fifty fields). Fields are counted after the command name's last ')'.
 */
function statFigures(text: string): StatFigures {
  let at = text.lastIndexOf(')') + 2
  let field = 3
  let cpuTicks = 0
  let startTicks = 0
  for (; field < 24 && at > 1; field++) {
    const end = text.indexOf(' ', at)
    if (field === 14 || field === 15) cpuTicks += Number(text.slice(at, end))
    else if (field === 22) startTicks = Number(text.slice(at, end))
    at = end + 1
  }
  const residentPages = Number(text.slice(at, text.indexOf(' ', at)))
  if (field !== 24 || !Number.isFinite(cpuTicks + startTicks + residentPages)) throw new Error('not a stat line')
  return { cpuTicks, startTicks, residentPages }
}

/** The fields of a /proc/<pid>/stat line after the command name (field 3 is [0]); the name may hold spaces and parentheses. */
function fieldsOf(text: string): string[] {
  return text.slice(text.lastIndexOf(')') + 2).split(' ')
}

function parsePids(text: string): number[] {
  const pids: number[] = []
  for (const line of text.split('\n')) if (line) pids.push(Number(line))
  return pids
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd)
  } catch {
    // closed already
  }
}
