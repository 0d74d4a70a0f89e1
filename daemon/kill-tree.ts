import { readFileSync } from 'node:fs'
import { setTimeout as delay } from 'node:timers/promises'
import { findTaskProcesses } from './process-scan.js'

export interface KillTreeOptions {
  taskId: string
  /** Leader's pid: its process group is signalled too. */
  pid: number | null
  signal: NodeJS.Signals | number
  /** Time to let the tree exit after `signal` before KILL, in milliseconds. */
  graceMs: number
  /** Resolves when the leader has exited (it is our child, so it must be reaped by us). */
  leaderExited: Promise<unknown>
  /** How long to wait for the tree to vanish after KILL, in milliseconds. Default 5000. */
  killWaitMs?: number
  /** The task's exact process list (its cgroup), when it has one; else processes are found by marker. */
  members?: () => number[]
  /**
   * The leader is a sandbox wrapper (bubblewrap): the first signal spares it and its pid-namespace
   * init, which end by themselves once the command has, so that the command gets its grace period.
   */
  wrapped?: boolean
}

const POLL_MS = 25

/**
 * Resolves once a task's leader has exited: when the spawner reports it, or (if that spawner died
 * and the orphan went to init) once the pid is gone or a zombie.
 */
export function leaderGone(pid: number, exited: Promise<unknown>): Promise<void> {
  return exited.then(
    () => undefined,
    async () => {
      // Bounded: after a minute a live pid is more likely a reused one than our leader.
      for (const deadline = Date.now() + 60_000; isRunning(pid) && Date.now() < deadline; ) await delay(POLL_MS)
    },
  )
}

function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z'
  } catch {
    return false
  }
}

/**
 * Stops a task's whole tree: `signal` to its process group and to every process that carries its
 * marker (escapees included), then KILL to whatever is left after the grace period. Resolves once
 * no process of the task is left, answering whether KILL was needed.
 */
export async function killTree(options: KillTreeOptions): Promise<{ escalated: boolean }> {
  const { taskId, pid, signal } = options
  let leaderGone = false
  void options.leaderExited.then(() => {
    leaderGone = true
  })
  const processes = () => options.members?.() ?? findTaskProcesses([taskId]).get(taskId) ?? []
  const signalAll = (which: NodeJS.Signals | number) => {
    const spareWrapper = options.wrapped === true && which !== 'SIGKILL' && which !== 9
    if (pid !== null && !spareWrapper) trySignal(-pid, which)
    if (pid !== null && !leaderGone && !spareWrapper) trySignal(pid, which)
    for (const member of processes()) if (!(spareWrapper && isSandboxWrapper(member))) trySignal(member, which)
  }
  const treeGone = () => leaderGone && processes().length === 0

  signalAll(signal)
  if (await waitUntil(treeGone, options.graceMs)) return { escalated: false }
  signalAll('SIGKILL')
  const killWaitMs = options.killWaitMs ?? 5000
  if (await waitUntil(treeGone, killWaitMs)) return { escalated: true }
  throw new Error(`task ${taskId}: processes still alive ${killWaitMs}ms after SIGKILL`)
}

/**
 * Kills every leftover process of the given tasks at once (used at exit and on restart), and the
 * process groups in `groups` (leaders that just exited: their group id cannot be reused while
 * members remain). Answers the processes it found, per task.
 */
export async function killLeftovers(taskIds: string[], groups: number[] = [], waitMs = 5000): Promise<Map<string, number[]>> {
  for (const group of groups) trySignal(-group, 'SIGKILL')
  const found = findTaskProcesses(taskIds)
  for (const pids of found.values()) for (const member of pids) trySignal(member, 'SIGKILL')
  if ([...found.values()].some((pids) => pids.length > 0)) await waitUntil(() => findTaskProcesses(taskIds).size === 0, waitMs)
  return found
}

/** Kills every process listed by `members` (a task's cgroup) until none is left. */
export async function killMembers(members: () => number[], waitMs = 5000): Promise<number> {
  const first = members()
  if (first.length === 0) return 0
  for (const member of first) trySignal(member, 'SIGKILL')
  await waitUntil(() => {
    const left = members()
    for (const member of left) trySignal(member, 'SIGKILL')
    return left.length === 0
  }, waitMs)
  return first.length
}

function isSandboxWrapper(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8') === 'bwrap\n'
  } catch {
    return false
  }
}

function trySignal(pid: number, signal: NodeJS.Signals | number): void {
  try {
    process.kill(pid, signal)
  } catch {
    // ESRCH: already gone; EPERM cannot happen for our own children.
  }
}

async function waitUntil(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (condition()) return true
    if (Date.now() >= deadline) return false
    await delay(Math.min(POLL_MS, Math.max(1, deadline - Date.now())))
  }
}
