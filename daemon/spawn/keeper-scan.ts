import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { readProcStat } from '../../protocol/index.js'
import type { KeeperRef } from './spawner.js'

/** The name every keeper gives itself (prctl PR_SET_NAME in daemon/spawner/keeper.c). */
const KEEPER_NAME = 'tend-keeper'

/** A keeper found in /proc, with the task it runs. */
export interface FoundKeeper {
  keeper: KeeperRef
  /** The task's leader (the keeper's oldest child), null when it has ended and the keeper is writing its exit file. */
  leader: { pid: number; startTicks: number } | null
}

interface Stat {
  pid: number
  name: string
  parent: number
  state: string
  startTicks: number
}

/**
 * Finds the live keepers of tasks whose records never said so (a daemon killed between a task's
 * start and its running record): a keeper holds its task's folder open for the whole task (to
 * write the exit file there), so /proc/<keeper>/fd names the folder exactly, whatever the task did
 * to its own environment. Answers, per folder of `taskDirs`, its keeper. Only processes this
 * daemon may inspect are seen: another user's keepers are not this daemon's.
 */
export function findKeepersOf(taskDirs: readonly string[]): Map<string, FoundKeeper> {
  const found = new Map<string, FoundKeeper>()
  if (taskDirs.length === 0) return found
  const wanted = new Set(taskDirs)
  const stats: Stat[] = []
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry)
    if (!Number.isInteger(pid) || pid <= 0) continue
    const stat = readStat(pid)
    if (stat) stats.push(stat)
  }
  for (const keeper of stats) {
    if (keeper.name !== KEEPER_NAME || keeper.state === 'Z' || keeper.state === 'X') continue
    const folder = heldFolder(keeper.pid, wanted)
    if (folder === null || found.has(folder)) continue
    // Its oldest live child is the task's leader (later ones are orphans it reaps as a subreaper).
    const children = stats.filter((each) => each.parent === keeper.pid && each.state !== 'Z' && each.state !== 'X').sort((a, b) => a.startTicks - b.startTicks)
    const leader = children[0] ? { pid: children[0].pid, startTicks: children[0].startTicks } : null
    found.set(folder, { keeper: { pid: keeper.pid, startTicks: keeper.startTicks }, leader })
  }
  return found
}

/** The wall-clock time a process started, from its start in clock ticks after boot (USER_HZ: 100 on Linux). */
export function startedAtOf(startTicks: number): Date | null {
  try {
    const btime = /^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1]
    return btime === undefined ? null : new Date(Number(btime) * 1000 + startTicks * 10)
  } catch {
    return null
  }
}

function heldFolder(pid: number, wanted: Set<string>): string | null {
  let fds: string[]
  try {
    fds = readdirSync(`/proc/${pid}/fd`)
  } catch {
    return null
  }
  for (const fd of fds) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`)
      if (wanted.has(target)) return target
    } catch {
      // closed meanwhile
    }
  }
  return null
}

function readStat(pid: number): Stat | null {
  const stat = readProcStat(pid)
  return stat && { pid, name: stat.name, state: stat.state, parent: stat.parent, startTicks: Number(stat.startTime) }
}
