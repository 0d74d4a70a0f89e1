import { setTimeout as delay } from 'node:timers/promises'
import { isAliveIdentity, processState } from '../spawn/process-scan.js'
import type { KeeperRef } from '../spawn/spawner.js'

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
 * keeper found stopped (state T or t; only SIGSTOP can stop it, and tend never sends one) is sent
 * SIGCONT, once its pid is checked to still be that keeper (start time). Never signals anything else.
 */
export async function answerUnreportedExit(watch: UnansweredExit): Promise<void> {
  let reported = false
  void watch.exited.then(
    () => (reported = true),
    () => (reported = true),
  )
  await delay(watch.graceMs)
  while (!reported) {
    await delay(KEEPER_ANSWER_MS)
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
