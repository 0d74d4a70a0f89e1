import { readFileSync } from 'node:fs'

/** What tend reads of a process's /proc/<pid>/stat. */
export interface ProcStat {
  /** The command name (field 2, `comm`), without its parentheses. */
  name: string
  /** The state letter (field 3): `R`, `S`, `T`, `Z`, `X`, … */
  state: string
  /** The parent's pid (field 4). */
  parent: number
  /** When it started, in clock ticks after boot (field 22), as written: with the pid, it names one process (a reused pid starts later). */
  startTime: string
}

/**
 * The fields of a /proc/<pid>/stat line. The command name (field 2) may hold spaces and
 * parentheses: fields are counted after its last ')'.
 */
export function parseProcStat(text: string): ProcStat {
  const close = text.lastIndexOf(')')
  const fields = text.slice(close + 2).split(' ')
  return { name: text.slice(text.indexOf('(') + 1, close), state: fields[0] ?? '', parent: Number(fields[1]), startTime: fields[19] ?? '' }
}

/**
 * A process's stat, or null when it cannot be read (no such process, or no /proc). Used by the
 * client too (is the daemon a zombie?), hence here and not in daemon/spawn/.
 */
export function readProcStat(pid: number): ProcStat | null {
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return null
  }
  return parseProcStat(text)
}
