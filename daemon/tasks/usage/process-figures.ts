import { closeSync, openSync } from 'node:fs'
import { childrenOf, openChildren, readChildren } from './process-tree.js'
import { ProcBuffer } from './proc-buffer.js'

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

const proc = new ProcBuffer(16 * 1024)

/**
 * A task's files that its samples read again and again, each opened once and read from its start
 * (pread) at every sample: its cgroup's process list, and its processes' /proc stat files. An open
 * /proc/<pid>/stat keeps naming the process it was opened for: once that one ends, reads fail, and
 * a later process given the same pid is never read through it. Close them when the task ends.
 */
export class TaskProcFiles {
  private membersFd: number | null = null
  private readonly stats = new Map<number, number>()
  /** The root's children file (treeFigures), held; -1 once the root is found not to be the one it was. */
  private rootChildren: number | null = null

  /** `membersFile`: its cgroup's cgroup.procs (null without a cgroup). */
  constructor(private readonly membersFile: string | null) {}

  /** The pids its cgroup lists now; null without a cgroup, or when it cannot be read. */
  members(): number[] | null {
    if (this.membersFile === null) return null
    try {
      this.membersFd ??= openSync(this.membersFile, 'r')
      return parsePids(proc.text(this.membersFd))
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
    this.closeUnlisted(new Set(pids))
    for (const pid of pids) {
      const stat = this.statOf(pid, notBeforeTicks)
      if (!stat) continue
      cpuTicks += stat.cpuTicks
      residentBytes += stat.residentPages * PAGE_BYTES
    }
    return { cpuTicks, residentBytes }
  }

  /**
   * The summed figures of the descendants of `root` (its keeper: a child subreaper, so the task's
   * orphans, a setsid and double-forked one too, are handed to it and stay below it), found through
   * the kernel's own tree (/proc/<pid>/task/<tid>/children). The root must be the process it was
   * (its start time), and is not counted; a child counts only while its stat names the parent it
   * was listed under and it started no earlier than `notBeforeTicks`: a pid reused meanwhile never
   * counts. Its files are then held (the first HELD_STATS_PER_TASK), naming that process only.
   */
  treeFigures(root: { pid: number; startTicks: number }, notBeforeTicks: number): ProcessFigures {
    let cpuTicks = 0
    let residentBytes = 0
    const listed = new Set<number>()
    const pending: number[] = []
    if (this.rootChildren === null) this.rootChildren = openChildren(root.pid, root.startTicks)
    if (this.rootChildren !== null && !readChildren(this.rootChildren, root.pid, pending)) {
      closeQuietly(this.rootChildren)
      this.rootChildren = -1
    }
    while (pending.length > 0) {
      const parent = pending.pop()!
      const pid = pending.pop()!
      if (listed.has(pid)) continue
      const stat = this.statOf(pid, notBeforeTicks, parent)
      if (!stat) continue
      listed.add(pid)
      cpuTicks += stat.cpuTicks
      residentBytes += stat.residentPages * PAGE_BYTES
      childrenOf(pid, stat.threads, pending)
    }
    this.closeUnlisted(listed)
    return { cpuTicks, residentBytes }
  }

  close(): void {
    if (this.rootChildren !== null && this.rootChildren >= 0) closeQuietly(this.rootChildren)
    this.rootChildren = null
    this.closeMembers()
    for (const fd of this.stats.values()) closeQuietly(fd)
    this.stats.clear()
  }

  private closeUnlisted(listed: ReadonlySet<number>): void {
    for (const [pid, fd] of this.stats)
      if (!listed.has(pid)) {
        closeQuietly(fd)
        this.stats.delete(pid)
      }
  }

  /**
   * A process's figures from its stat, through its held file when there is one. A file opened now
   * counts only a process started no earlier than `notBeforeTicks` and, given `parent`, whose
   * parent that is.
   */
  private statOf(pid: number, notBeforeTicks: number, parent?: number): StatFigures | null {
    const held = this.stats.get(pid)
    if (held !== undefined) {
      try {
        return statFigures(proc.read(held))
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
      figures = statFigures(proc.read(fd))
    } catch {
      // ended between its listing and now
    }
    const ours = figures !== null && figures.startTicks >= notBeforeTicks && (parent === undefined || figures.parent === parent)
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

interface StatFigures {
  /** ppid (field 4). */
  parent: number
  /** utime + stime (fields 14 and 15). */
  cpuTicks: number
  /** num_threads (field 20). */
  threads: number
  /** starttime (field 22). */
  startTicks: number
  /** rss (field 24). */
  residentPages: number
}

/** One answer object, filled again by every parse (a thousand tasks a second: no garbage per stat). */
const parsed: StatFigures = { parent: 0, cpuTicks: 0, threads: 0, startTicks: 0, residentPages: 0 }

/**
 * The figures of the /proc/<pid>/stat line in `proc.bytes` (its first `length` bytes), read digit by
 * digit where they stand: no string is made. Fields are counted after the command name's last ')'
 * (the name may hold spaces and parentheses). The answer is shared: read it before the next parse.
 */
function statFigures(length: number): StatFigures {
  let at = length - 1
  while (at >= 0 && proc.bytes[at] !== 41) at--
  if (at < 0) throw new Error('not a stat line')
  at += 2
  let field = 3
  let value = 0
  parsed.cpuTicks = 0
  for (; at < length && field <= 24; at++) {
    const byte = proc.bytes[at]!
    if (byte >= 48 && byte <= 57) {
      value = value * 10 + byte - 48
      continue
    }
    // The state (field 3) is a letter, and no field read here is negative: only a space ends a field.
    if (byte !== 32 && byte !== 10) continue
    if (field === 4) parsed.parent = value
    else if (field === 14 || field === 15) parsed.cpuTicks += value
    else if (field === 20) parsed.threads = value
    else if (field === 22) parsed.startTicks = value
    else if (field === 24) parsed.residentPages = value
    field++
    value = 0
  }
  if (field <= 24) throw new Error('not a stat line')
  return parsed
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
