import { closeSync, openSync, readdirSync, readFileSync, readSync } from 'node:fs'
import { readProcStat } from '../../protocol/index.js'

/** A task's keeper as recorded at its start: its pid and start time (field 22 of its stat) name it. */
export interface KeeperIdentity {
  pid: number
  startTicks: number
}

/**
 * Every live descendant of a task's keeper, the keeper excluded: the task's processes, found
 * through the kernel's own tree (/proc/<pid>/task/<tid>/children). The keeper is a child subreaper
 * (keeper.c): a process the task left, setsid'd, double-forked or moved to a cgroup of its own
 * making (an `off` task runs on the daemon's uid, which owns its task group's files), is handed to
 * the keeper when its parent ends, and stays below it, in whatever group; the keeper stays while it
 * has such a child and a daemon listens (leftovers.c). Nothing a task can write decides what is
 * found here.
 *
 * The keeper's children file is opened, then the keeper's start time checked: had its pid been
 * reused before the open, the file names another process, and nothing is answered. A process is
 * counted while its stat names the parent it was listed under (it has not been reaped and its pid
 * reused meanwhile); one handed to the keeper between two reads is found at the next look (a stop
 * looks again and again until none is left). A zombie is not counted: it has ended.
 */
export function keeperDescendants(keeper: KeeperIdentity | null | undefined): number[] {
  if (!keeper) return []
  const listed = keeperChildren(keeper)
  const found: number[] = []
  const seen = new Set<number>()
  const pending = listed.map((child) => [child, keeper.pid] as const)
  while (pending.length > 0) {
    const [pid, parent] = pending.pop()!
    if (seen.has(pid) || pid === keeper.pid) continue
    seen.add(pid)
    const stat = readProcStat(pid)
    if (!stat || stat.parent !== parent || stat.state === 'Z' || stat.state === 'X') continue
    found.push(pid)
    for (const child of childrenOf(pid)) pending.push([child, pid])
  }
  return found
}

/** The keeper's children, read through a file checked to be the keeper's (see above); [] when it is gone. */
function keeperChildren(keeper: KeeperIdentity): number[] {
  let fd: number
  try {
    fd = openSync(`/proc/${keeper.pid}/task/${keeper.pid}/children`, 'r')
  } catch {
    return []
  }
  try {
    if (Number(readProcStat(keeper.pid)?.startTime ?? -1) !== keeper.startTicks) return []
    const bytes = Buffer.alloc(65536)
    let text = ''
    for (let length = readSync(fd, bytes); length > 0; length = readSync(fd, bytes)) text += bytes.toString('latin1', 0, length)
    return parsePids(text)
  } catch {
    return []
  } finally {
    closeSync(fd)
  }
}

/** A process's children, of every thread of it (a child belongs to the thread that forked it). */
function childrenOf(pid: number): number[] {
  let tids: string[]
  try {
    tids = readdirSync(`/proc/${pid}/task`)
  } catch {
    return []
  }
  return tids.flatMap((tid) => {
    try {
      return parsePids(readFileSync(`/proc/${pid}/task/${tid}/children`, 'latin1'))
    } catch {
      return []
    }
  })
}

function parsePids(text: string): number[] {
  return text
    .split(' ')
    .map((word) => Number(word.trim()))
    .filter((pid) => Number.isSafeInteger(pid) && pid > 0)
}
