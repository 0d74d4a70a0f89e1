import { readdirSync, readFileSync } from 'node:fs'

/** Every task's processes carry this variable; descendants inherit it even after setsid or a double fork. */
export const TASK_MARKER_VARIABLE = 'TEND_TASK_ID'

/**
 * Finds live processes whose environment carries the marker of one of `taskIds`. The marker is
 * unique per task, so a reused pid can never be mistaken for a task's process. Answers a map
 * from task id to pids. Zombies and the daemon itself never match.
 */
export function findTaskProcesses(taskIds: Iterable<string>): Map<string, number[]> {
  // The marker either opens the environment block or follows another variable's NUL.
  const wanted = new Map<string, { first: Buffer; later: Buffer }>()
  for (const id of taskIds) {
    wanted.set(id, { first: Buffer.from(`${TASK_MARKER_VARIABLE}=${id}\0`), later: Buffer.from(`\0${TASK_MARKER_VARIABLE}=${id}\0`) })
  }
  const found = new Map<string, number[]>()
  if (wanted.size === 0) return found
  const prefix = Buffer.from(`${TASK_MARKER_VARIABLE}=`)
  // Most entries are kernel threads whose environ cannot be read; without stack traces those
  // failed reads cost a fifth as much (docs/benchmarks.md).
  const stackTraceLimit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    scan(prefix, wanted, found)
  } finally {
    Error.stackTraceLimit = stackTraceLimit
  }
  return found
}

function scan(prefix: Buffer, wanted: Map<string, { first: Buffer; later: Buffer }>, found: Map<string, number[]>): void {
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry)
    if (!Number.isInteger(pid) || pid === process.pid) continue
    let environ: Buffer
    try {
      environ = readFileSync(`/proc/${pid}/environ`)
    } catch {
      continue
    }
    if (environ.indexOf(prefix) === -1) continue
    for (const [id, marker] of wanted) {
      if (environ.indexOf(marker.first) === 0 || environ.indexOf(marker.later) !== -1) {
        const pids = found.get(id) ?? []
        pids.push(pid)
        found.set(id, pids)
      }
    }
  }
}
