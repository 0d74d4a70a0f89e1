import type { FileHandle } from 'node:fs/promises'
import type { Logger } from 'pino'
import type { Task, TaskUsage } from '../../../protocol/index.js'
import { heldFootprintSync, outputFootprintSync, truncateRegularFile } from '../../../spool/index.js'
import { TaskCgroups, type GroupRoots } from '../../sandbox/cgroups.js'
import { killLeftovers, killMembers, killTree, leaderGone, type KillTreeOptions, type TaskGroup } from '../../spawn/kill-tree.js'
import { keeperDescendants, type KeeperIdentity } from '../../spawn/keeper-tree.js'
import type { ProcessIdentity } from '../../spawn/process-scan.js'
import { taskMarker } from '../../spawn/run-name.js'
import type { SpawnExit } from '../../spawn/spawner.js'
import { DAEMON_ENDED_LIFELINE, LEASE_RAN_OUT } from './ending.js'
import { holdsDiskPastEnd } from '../output/output-cap.js'
import { withUsage } from '../usage/final-usage.js'
import { markEnded, markLost, withOutputLoss, type Ending } from '../transitions.js'
import { withPortsCleared } from '../ports/ports-cleared.js'

/** How long the kill of a task's remains may take before it is reported, in milliseconds. */
const KILL_WAIT_MS = 5000

// How every task ends, whoever finds it ended (its TaskRun, or recovery at the next start): what is
// left of it is killed, its output is cut back to its cap, and its end is recorded.

/**
 * Kills what is left of a task whose leader has gone (background jobs, setsid escapees): the
 * cgroup lists it; without one, every process carrying the run's marker, and the leader's
 * process group (`leaderGroup`: its id cannot be reused while members remain). Then whatever is
 * still below its keeper (`keeper`: a child subreaper, which stays while it has a child, see
 * leftovers.c): a process the task moved out of its group is there.
 */
export async function killRemains(
  task: Pick<Task, 'id' | 'run'>,
  cgroups: TaskCgroups | null | undefined,
  leaderGroup?: number,
  keeper?: KeeperIdentity | null,
): Promise<void> {
  // A v2 group is emptied at once (cgroup.kill) and known empty when the kernel says so (cgroup.events).
  if (cgroups?.killAll()) {
    if (!(await cgroups.untilEmpty(KILL_WAIT_MS))) await killMembers(() => cgroups.members())
  } else if (cgroups) await killMembers(() => cgroups.members())
  else await killLeftovers([taskMarker(task)], leaderGroup === undefined ? [] : [leaderGroup])
  await killKeeperTree(keeper)
}

/** Kills every process below a task's keeper (keeper-tree.ts) until none is left; the keeper then exits by itself. */
export async function killKeeperTree(keeper: KeeperIdentity | null | undefined): Promise<void> {
  if (keeper) await killMembers(() => keeperDescendants(keeper), KILL_WAIT_MS)
}

/** Kills a task's whole tree at once (SIGKILL, no grace): a failure is logged, never thrown. */
export async function killTreeNow(log: Logger, options: Omit<KillTreeOptions, 'signal' | 'graceMs'>): Promise<void> {
  await killTree({ ...options, signal: 'SIGKILL', graceMs: 0 }).catch((error: unknown) =>
    log.error({ taskId: options.taskId, err: error }, 'task tree did not die'),
  )
}

/** What a started task's process is known by: its pid, its exit, and, when known, its leader, cgroup members and keeper. */
export interface StartedProcess {
  pid: number
  exited: Promise<unknown>
  leader?: ProcessIdentity | null
  members?: () => number[]
  group?: TaskGroup
  keeper?: KeeperIdentity | null
}

/** A started task's tree as killTree finds it (kill-tree.ts): by its run's marker and, when known, its leader and cgroup members. */
export function startedTree(task: Task, started: StartedProcess): Omit<KillTreeOptions, 'signal' | 'graceMs'> {
  const { pid, leader, members, group, keeper } = started
  return {
    taskId: task.id,
    marker: taskMarker(task),
    pid,
    ...(leader === undefined ? {} : { leader }),
    leaderExited: leaderGone(pid, started.exited),
    ...(members ? { members } : {}),
    ...(group ? { group } : {}),
    ...(keeper ? { keeper } : {}),
  }
}

/** Kills a started task's whole tree at once (startedTree). */
export function killStartedTree(log: Logger, task: Task, started: StartedProcess): Promise<void> {
  return killTreeNow(log, startedTree(task, started))
}

/**
 * Kills what still runs in the cgroup a daemon left behind for task `id` (a daemon that died, a
 * corrupt entry, a group it could not remove), then removes the group. Answers how many processes
 * were killed.
 */
export async function killGroupLeftovers(roots: GroupRoots, id: string): Promise<number> {
  const members = () => TaskCgroups.leftoverMembers(roots, id)
  const found = members().length
  if (found > 0) await TaskCgroups.killLeftover(roots, id, KILL_WAIT_MS)
  const killed = Math.max(found, await killMembers(members))
  await TaskCgroups.removeLeftover(roots, id)
  return killed
}

/** Where a task's output is, to settle it once the task has ended. */
export interface OutputToSettle {
  taskId: string
  /** output.log's path, read when no descriptor is held (or the held one was let go of). */
  file: string
  /** The daemon's descriptor on output.log while the task ran (held-outputs.ts). */
  held: FileHandle | undefined
  maxOutputBytes: number
}

/**
 * Cuts the output back to its cap and answers its final size: output past the cap (written between
 * two checks, or while no daemon ran) is cut off, and disk taken past the output's end is given back
 * (a truncation to its own size frees it). A file the task replaced or holds a lease on stays as it
 * is: the record still says the cap.
 */
export async function settleOutput(output: OutputToSettle, log: Logger): Promise<number> {
  const { file, held, maxOutputBytes } = output
  const footprint = (held && heldFootprintOrNull(held)) ?? outputFootprintSync(file)
  const cut = footprint.size > maxOutputBytes ? maxOutputBytes : holdsDiskPastEnd(footprint, maxOutputBytes) ? footprint.size : null
  const cutOff = (bytes: number) => (held ? held.truncate(bytes) : truncateRegularFile(file, bytes))
  if (cut !== null) await cutOff(cut).catch((error: unknown) => log.warn({ taskId: output.taskId, err: error }, 'output past its cap could not be cut off'))
  return Math.min(footprint.size, maxOutputBytes)
}

/** How a started task's end is recorded: as it ended, or lost (the reason says why nobody knows more). */
export type RecordedEnd = { ending: Ending } | { lost: string }

/**
 * The final record of a started task; `outputLostBytes`: what its keeper could not write of a
 * terminal's output; `usage`: what it used, when known (usage/final-usage.ts).
 */
export function endedRecord(task: Task, end: RecordedEnd, outputBytes: number, at: Date, outputLostBytes?: number, usage?: TaskUsage): Task {
  const ended = 'lost' in end ? markLost(task, end.lost, outputBytes, at) : markEnded(task, end.ending, outputBytes, at)
  return withUsage(withPortsCleared(withOutputLoss(ended, outputLostBytes)), usage)
}

/**
 * Why a task its keeper ended (its lease ran out, or its lifeline broke) is lost. `lifeline`: how
 * the lifeline broke, as whoever finds it knows (the daemon ended, or its spawner's helper did).
 */
export function keeperEndedReason(exit: Pick<SpawnExit, 'leaseRanOut'>, lifeline = DAEMON_ENDED_LIFELINE): string {
  return exit.leaseRanOut ? LEASE_RAN_OUT : lifeline
}

/** The held output's footprint; null when its descriptor was let go of meanwhile. */
function heldFootprintOrNull(held: FileHandle): ReturnType<typeof heldFootprintSync> | null {
  try {
    return heldFootprintSync(held)
  } catch {
    return null
  }
}
