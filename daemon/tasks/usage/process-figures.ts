import { readdirSync, readFileSync } from 'node:fs'

/**
 * Clock ticks per second of /proc's CPU times (USER_HZ): 100 on every Linux tend runs on (the
 * kernel's ABI fixes it for x86 and arm64 alike).
 */
export const CLOCK_TICKS_PER_SECOND = 100
/** Bytes of a page, for /proc's resident set (4 KiB on x86 and arm64's usual kernels). */
const PAGE_BYTES = 4096

/** What a set of processes holds now: CPU time since each started (ticks) and resident memory. */
export interface ProcessFigures {
  cpuTicks: number
  residentBytes: number
}

/**
 * The summed figures of `pids` from their /proc/<pid>/stat (utime, stime, rss), counting only a
 * process that started no earlier than `notBeforeTicks` (the task's leader's start time): a pid
 * that was listed, then ended and was reused by a process older than the task cannot count. A
 * pid that is gone counts nothing.
 */
export function processFigures(pids: readonly number[], notBeforeTicks: number): ProcessFigures {
  let cpuTicks = 0
  let residentBytes = 0
  for (const pid of pids) {
    const fields = statFields(pid)
    if (!fields) continue
    const startTicks = Number(fields[19])
    if (!(startTicks >= notBeforeTicks)) continue
    cpuTicks += Number(fields[11]) + Number(fields[12])
    residentBytes += Number(fields[21]) * PAGE_BYTES
  }
  return { cpuTicks, residentBytes }
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
    const fields = statFields(pid)
    if (!fields) continue
    const session = Number(fields[3])
    const members = sessions.get(session)
    if (members) members.push(pid)
    else sessions.set(session, [pid])
  }
  return sessions
}

/** The fields of /proc/<pid>/stat after the command name (field 3 is [0]), or null when it cannot be read. */
function statFields(pid: number): string[] | null {
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'latin1')
  } catch {
    return null
  }
  // The command name may hold spaces and parentheses: fields are counted after its last ')'.
  return text.slice(text.lastIndexOf(')') + 2).split(' ')
}
