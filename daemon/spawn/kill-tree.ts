import { pollUntil } from '../../protocol/index.js'
import { keeperDescendants, type KeeperIdentity } from './keeper-tree.js'
import { findSandboxProcesses, findTaskProcesses, isAliveIdentity, isInNamespace, isLeaderPid, processState, type ProcessIdentity } from './process-scan.js'

export interface KillTreeOptions {
  taskId: string
  /** The environment entry every process of this run of the task carries (taskMarker in run-name.ts). */
  marker: string
  /** Leader's pid: its process group is signalled too. */
  pid: number | null
  /**
   * The leader as the daemon started it (pid and start time; null: not known to be the daemon's).
   * When given, the pid and its group are signalled only while no other process has that pid
   * (isLeaderPid): a leader reaped by its keeper while the daemon was frozen can have left its pid
   * to another daemon's task. Absent: the pid is the daemon's own child, not reaped yet.
   */
  leader?: ProcessIdentity | null
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
   * The task's cgroup v2 group, when it has one: KILL reaches all of it at once (cgroup.kill, forks
   * racing the kill included), and its end is the kernel's `populated 0` (cgroup.events), not a scan.
   */
  group?: TaskGroup
  /**
   * The task's keeper, a child subreaper: its descendants are the task's, whatever cgroup they
   * moved to (an `off` task can move its own out of its group), so they are signalled with the
   * members and the stop ends only once none is left (keeper-tree.ts). Absent: no keeper.
   */
  keeper?: KeeperIdentity | null
  /**
   * The leader is bubblewrap's monitor around a pid namespace (workspace, strict): the signal goes
   * to every process in the namespace but bubblewrap's init, and the sandbox is held open until
   * they have all exited or the grace period is over (see stopSandbox). Default false.
   */
  wrapped?: boolean
}

/** What a stop needs of a task's cgroup v2 group (TaskCgroups). */
export interface TaskGroup {
  /** KILLs every process in it at once; false: not possible here (then members are killed one by one). */
  killAll(): boolean
  /** Resolves true once no process is left in it, false past `timeoutMs`. */
  untilEmpty(timeoutMs: number): Promise<boolean>
}

const POLL_MS = 25
/** How long a sandbox's monitor may take to stop on SIGSTOP before the stop goes on without holding it, in milliseconds. */
const HOLD_TIMEOUT_MS = 1000

/**
 * Resolves once a task's leader has exited: when the spawner reports it, or (if that spawner died
 * and the orphan went to init) once the pid is gone or a zombie.
 */
export function leaderGone(pid: number, exited: Promise<unknown>): Promise<void> {
  return exited.then(
    () => undefined,
    async () => {
      // Bounded: after a minute a live pid is more likely a reused one than our leader.
      await pollUntil(() => !isRunning(pid), 60_000, POLL_MS)
    },
  )
}

function isRunning(pid: number): boolean {
  const state = processState(pid)
  return state !== null && state !== 'Z'
}

export interface KillTreeResult {
  /** KILL was needed. */
  escalated: boolean
  /**
   * The first signal reached a live process of the task. False when everything had already
   * exited: the task ended by itself, and is to be recorded so, not as stopped.
   */
  signalled: boolean
}

/**
 * Stops a task's whole tree: `signal` to every process of it (escapees included), then KILL to
 * whatever is left after the grace period. Resolves once no process of the task is left.
 */
export async function killTree(options: KillTreeOptions): Promise<KillTreeResult> {
  const leader = { gone: false }
  void options.leaderExited.then(() => {
    leader.gone = true
  })
  // A pid that is another process's now: only the task's members (cgroup, marker) are its.
  if (options.pid !== null && options.leader !== undefined && !isLeaderPid(options.pid, options.leader)) return stopPlain({ ...options, pid: null }, leader)
  return options.wrapped === true && options.pid !== null ? stopSandbox(options, options.pid, leader) : stopPlain(options, leader)
}

/** Whether the pid-directed signals of a stop still reach only the task (see KillTreeOptions.leader). */
function leaderPidIsOurs(options: KillTreeOptions, pid: number): boolean {
  return options.leader === undefined || isLeaderPid(pid, options.leader)
}

/** A task without a pid namespace (`off`): its process group, leader and cgroup members or marked processes. */
async function stopPlain(options: KillTreeOptions, leader: { gone: boolean }): Promise<KillTreeResult> {
  const { pid } = options
  const processes = async () => union(options.members?.() ?? (await markedProcesses(options.marker)), keeperDescendants(options.keeper))
  // Whether anything of the task still ran when the first signal went out (a zombie does not count).
  const signalled = (pid !== null && !leader.gone && isRunning(pid)) || (await processes()).some(isRunning)
  const signalAll = async (signal: NodeJS.Signals | number) => {
    if (pid !== null && leaderPidIsOurs(options, pid)) {
      trySignal(-pid, signal)
      if (!leader.gone) trySignal(pid, signal)
    }
    for (const member of await processes()) trySignal(member, signal)
  }
  if (!isKill(options.signal)) {
    await signalAll(options.signal)
    const { group } = options
    // With a v2 group the kernel says when the group is gone (populated 0); the leader, in it, has
    // exited by then; what left the group is still below the keeper.
    const deadline = Date.now() + options.graceMs
    const ended = group
      ? (await group.untilEmpty(options.graceMs)) &&
        (await waitUntil(() => leader.gone && keeperDescendants(options.keeper).length === 0, deadline - Date.now()))
      : await waitUntil(async () => leader.gone && (await processes()).length === 0, options.graceMs)
    if (ended) return { escalated: false, signalled }
  }
  await signalAll('SIGKILL')
  if (await killGroup(options, leader)) return { escalated: true, signalled }
  // KILL again at every look: a process forked between a look and its KILL is caught at the next.
  await killUntilGone(options, async () => {
    const left = await processes()
    for (const member of left) trySignal(member, 'SIGKILL')
    return leader.gone && left.length === 0
  })
  return { escalated: true, signalled }
}

/**
 * A sandboxed task. bubblewrap's monitor (the leader, on the host side) exits as soon as the
 * command (pid 2 inside) has, and the kernel then KILLs whatever is left in the namespace: a child
 * cleaning up after TERM would get no grace. So the monitor is stopped (SIGSTOP) first, while
 * bubblewrap's init goes on reaping inside and exits by itself once the namespace is otherwise
 * empty. The signal goes to every process in the namespace but init. Once init has exited, the
 * monitor is continued and reports the command's status (e.g. 143 after TERM); when the grace
 * period is over first, init and the monitor are KILLed. A task that ends by itself is never held,
 * so its leftovers still die with its namespace at once; and a held monitor still dies with its
 * parent (SIGKILL ends a stopped process), its sandbox with it.
 */
async function stopSandbox(options: KillTreeOptions, monitor: number, leader: { gone: boolean }): Promise<KillTreeResult> {
  const held = !isKill(options.signal) && (await hold(monitor, leader))
  const resume = () => {
    if (!leader.gone) trySignal(monitor, 'SIGCONT')
  }
  try {
    // Found while the monitor is held: it cannot clone a sandbox after this look.
    const sandbox = await findSandboxProcesses(monitor)
    const members = () => union(options.members?.() ?? [], keeperDescendants(options.keeper)).filter((member) => member !== monitor)
    // A sandbox still being set up (no init yet) is stopped as it is; one whose command is gone
    // already was not.
    let signalled = !sandbox ? !leader.gone : sandbox.processes.some(isRunning)
    if (!isKill(options.signal) && sandbox) {
      let reached = 0
      for (const member of sandbox.processes) {
        // Checked right before the signal: a pid that left the namespace may be reused already.
        if (isInNamespace(member, sandbox.namespace) && trySignal(member, options.signal)) reached += 1
      }
      signalled = reached > 0
      // With nothing of the command running in it (not started yet, or gone already) there is
      // nothing to wait for: KILL below.
      if (reached > 0 && (await waitUntil(() => leader.gone || !isAliveIdentity(sandbox.init), options.graceMs))) {
        resume()
        const ended = () => leader.gone && !isAliveIdentity(sandbox.init) && members().length === 0
        if (await waitUntil(ended, options.killWaitMs ?? 5000)) return { escalated: false, signalled }
      }
    }
    if (await killGroup(options, leader)) return { escalated: true, signalled }
    // KILL to init ends the whole namespace. Init first: bubblewrap sets up the sandbox before it
    // binds its init's life to the monitor's, so a monitor killed first could leave it behind.
    if (sandbox && isAliveIdentity(sandbox.init)) trySignal(sandbox.init.pid, 'SIGKILL')
    if (leaderPidIsOurs(options, monitor)) {
      if (!leader.gone) trySignal(monitor, 'SIGKILL')
      trySignal(-monitor, 'SIGKILL')
    }
    await killUntilGone(options, async () => {
      // Init's end kills everything in its namespace at once, in pid order (parents first): members
      // killed one by one before it is gone could let a shell outlive its child long enough to say
      // so ("Killed") in the output.
      if (sandbox && isAliveIdentity(sandbox.init)) {
        trySignal(sandbox.init.pid, 'SIGKILL')
        return false
      }
      const left = [...members(), ...(sandbox ? [] : await markedProcesses(options.marker))]
      for (const member of left) trySignal(member, 'SIGKILL')
      return leader.gone && left.length === 0
    })
    return { escalated: true, signalled }
  } finally {
    if (held) resume()
  }
}

/** Stops the monitor and answers once it is stopped (false if it is gone, or did not stop in time). */
async function hold(monitor: number, leader: { gone: boolean }): Promise<boolean> {
  if (leader.gone || !trySignal(monitor, 'SIGSTOP')) return false
  const stopped = () => processState(monitor) === 'T'
  return (await waitUntil(() => leader.gone || stopped(), HOLD_TIMEOUT_MS, 1)) && !leader.gone && stopped()
}

/**
 * KILLs the task's v2 group at once and waits for the kernel to say it is empty and for the
 * leader's reported exit; false when there is no such group, or it did not empty in time (the
 * process-by-process kill then goes on).
 */
async function killGroup(options: KillTreeOptions, leader: { gone: boolean }): Promise<boolean> {
  const { group } = options
  if (!group?.killAll()) return false
  const killWaitMs = options.killWaitMs ?? 5000
  // Emptied by the kernel at once; what the task moved out of it (below its keeper) is killed one by one.
  return (await group.untilEmpty(killWaitMs)) && (await waitUntil(() => leader.gone, killWaitMs)) && keeperDescendants(options.keeper).length === 0
}

function union(first: number[], second: number[]): number[] {
  return second.length === 0 ? first : [...new Set([...first, ...second])]
}

async function markedProcesses(marker: string): Promise<number[]> {
  return (await findTaskProcesses([marker])).get(marker) ?? []
}

async function killUntilGone(options: KillTreeOptions, gone: () => Promise<boolean>): Promise<void> {
  const killWaitMs = options.killWaitMs ?? 5000
  if (!(await waitUntil(gone, killWaitMs))) throw new Error(`task ${options.taskId}: processes still alive ${killWaitMs}ms after SIGKILL`)
}

/**
 * Kills every leftover process of the given task runs (their markers, taskMarker) at once (used at
 * exit and on restart), and the process groups in `groups` (leaders that just exited: their group
 * id cannot be reused while members remain). Answers the processes it found, per marker.
 */
export async function killLeftovers(markers: string[], groups: number[] = [], waitMs = 5000): Promise<Map<string, number[]>> {
  for (const group of groups) trySignal(-group, 'SIGKILL')
  const found = await findTaskProcesses(markers)
  for (const pids of found.values()) for (const member of pids) trySignal(member, 'SIGKILL')
  if (found.size > 0) {
    await waitUntil(async () => {
      const left = await findTaskProcesses(markers)
      for (const pids of left.values()) for (const member of pids) trySignal(member, 'SIGKILL')
      return left.size === 0
    }, waitMs)
  }
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

function isKill(signal: NodeJS.Signals | number): boolean {
  return signal === 'SIGKILL' || signal === 9
}

/** Answers whether the signal was sent. */
function trySignal(pid: number, signal: NodeJS.Signals | number): boolean {
  try {
    process.kill(pid, signal)
    return true
  } catch {
    // ESRCH: already gone; EPERM cannot happen for our own children.
    return false
  }
}

function waitUntil(condition: () => boolean | Promise<boolean>, timeoutMs: number, pollMs = POLL_MS): Promise<boolean> {
  return pollUntil(condition, timeoutMs, pollMs)
}
