import { statfs } from 'node:fs/promises'
import { setTimeout as delay } from 'node:timers/promises'
import { isAliveIdentity, processState, type ProcessIdentity } from '../../spawn/process-scan.js'
import type { KeeperRef } from '../../spawn/spawner.js'
import type { TaskRunContext, Tracked } from './task-run-context.js'

/** How long after a stop's grace the exit may go unreported before the keeper and helper are looked at, and again between looks. */
export const KEEPER_ANSWER_MS = 2000

export interface UnansweredExit {
  /** Settles once the task's exit is reported (or its spawner gave up on it). */
  exited: Promise<unknown>
  keeper: KeeperRef | null | undefined
  /** The stop's grace: the leader may take that long to end on its own. */
  graceMs: number
  /** Checks the helper between the daemon and the keeper (replaced if it does not answer). */
  prodHelper: () => void
  onContinued: (keeper: number) => void
}

/**
 * After tend began to stop a task: a keeper that does not report the exit must not hold the kill,
 * the daemon's stop or the task's slot. While the exit goes unreported, every KEEPER_ANSWER_MS the
 * helper is pinged (a stopped or wedged one is replaced, and the keeper attached to again) and a
 * keeper found stopped (state T or t; only SIGSTOP can stop it, and tend never sends one to a keeper) is sent
 * SIGCONT, once its pid is checked to still be that keeper (start time). Never signals anything else.
 */
export async function answerUnreportedExit(watch: UnansweredExit): Promise<void> {
  let reported = false
  void watch.exited.then(
    () => (reported = true),
    () => (reported = true),
  )
  await delay(watch.graceMs, undefined, { ref: false })
  while (!reported) {
    await delay(KEEPER_ANSWER_MS, undefined, { ref: false })
    if (reported) return
    watch.prodHelper()
    const keeper = watch.keeper
    if (!keeper) continue
    const identity = { pid: keeper.pid, startTime: String(keeper.startTicks) }
    // Gone: the helper reports the exit from its file (or as unknown) on its own.
    if (!isAliveIdentity(identity)) continue
    const state = processState(keeper.pid)
    if (state !== 'T' && state !== 't') continue
    try {
      process.kill(keeper.pid, 'SIGCONT')
      watch.onContinued(keeper.pid)
    } catch {
      // Gone meanwhile.
    }
  }
}

/** A run's watch for its unreported exit (answerUnreportedExit): its spawner's helper is prodded, a keeper continued is logged. */
export function answerRunExit(
  context: Pick<TaskRunContext, 'spawner' | 'log'>,
  taskId: string,
  tracked: Pick<Tracked, 'exited' | 'keeper'>,
  graceMs: number,
): Promise<void> {
  const { spawner, log } = context
  return answerUnreportedExit({
    exited: tracked.exited,
    keeper: tracked.keeper,
    graceMs,
    prodHelper: () => spawner.prod?.(),
    onContinued: (keeper) => log.warn({ taskId, keeper }, 'the keeper of a task that ended or is being stopped was itself stopped (SIGSTOP); continued'),
  })
}

/** How often a resumed task's leader is looked at, and how long its keeper has to report its end once it is gone. */
const LEADER_LOOK_MS = 1000

export interface ResumedExit {
  exited: Promise<unknown>
  /** The leader as read at resume (null: it had ended already). */
  leader: ProcessIdentity | null | undefined
  /** Whether the spool lacks room for an exit file (the reserve is given up only then). */
  spoolIsShort: () => Promise<boolean>
  /** Gives up the spool's reserve; answers whether it freed anything. */
  releaseReserve: () => Promise<boolean>
  onReleased: () => void
}

/**
 * A task an earlier daemon started: the helper its keeper reported to is gone, so its ending reaches
 * this daemon only through its exit file, which the keeper writes before it exits. On a full disk
 * it cannot, and the keeper keeps retrying: once the leader has ended (kernel fact: that process is
 * gone) and the exit is still unreported LEADER_LOOK_MS later on a spool short of room, the spool's
 * reserve is given up to make room for the file (and for the record after it).
 */
export async function makeRoomForResumedExit(watch: ResumedExit): Promise<void> {
  let reported = false
  void watch.exited.then(
    () => (reported = true),
    () => (reported = true),
  )
  while (!reported && watch.leader && isAliveIdentity(watch.leader)) await delay(LEADER_LOOK_MS, undefined, { ref: false })
  await delay(LEADER_LOOK_MS, undefined, { ref: false })
  if (!reported && (await watch.spoolIsShort()) && (await watch.releaseReserve())) watch.onReleased()
}

/** Room under which an exit file may not fit: a few blocks, or a few inodes. */
const SHORT_BYTES = 64 * 1024
const SHORT_INODES = 16

/** Whether the file system at `path` is short of room for an exit file (kernel fact: statfs); true when it cannot be asked. */
export async function spoolIsShort(path: string): Promise<boolean> {
  try {
    const stats = await statfs(path)
    return stats.bavail * stats.bsize < SHORT_BYTES || (stats.files > 0 && stats.ffree < SHORT_INODES)
  } catch {
    return true
  }
}
