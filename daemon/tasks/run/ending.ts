import { formatDuration, signalLabel, type StoppedBy } from '../../../protocol/index.js'
import type { SpawnExit } from '../../spawn/spawner.js'
import type { Ending } from '../transitions.js'

/** A stop tend itself decided: how the ending is to be recorded, and who asked for it. */
export type Stopping =
  | {
      state: 'killed'
      stoppedBy: Exclude<StoppedBy, 'timeout' | 'outside-signal' | 'memory-limit'>
      reason: string
      signal: NodeJS.Signals | number
      graceMs: number
    }
  | { state: 'timed_out'; stoppedBy: 'timeout'; reason: string; signal: NodeJS.Signals | number; graceMs: number }

/** A stop asked for through the API (or by whoever started the task, e.g. a queue worker), as Supervisor.kill takes it. */
export interface KillRequest {
  signal?: NodeJS.Signals | number
  graceMs?: number
  /** The caller's words, appended to the recorded reason. */
  note?: string
  /**
   * Who asks: an agent (`owner`), its session's disposal (`session-end`), whoever started the task
   * once it can no longer confirm the task's lease (`lease-expired`), else the operator.
   */
  stoppedBy?: Extract<StoppedBy, 'owner' | 'operator' | 'session-end' | 'lease-expired'>
}

/** The stop a kill request asks for; SIGTERM and the daemon's grace (`defaultGraceMs`) unless it says otherwise. */
export function requestedStop(request: KillRequest, defaultGraceMs: number): Stopping {
  const signal = request.signal ?? 'SIGTERM'
  return {
    state: 'killed',
    stoppedBy: request.stoppedBy ?? 'operator',
    reason: withNote(`killed by request (${signalLabel(signal)})`, request.note),
    signal,
    graceMs: request.graceMs ?? defaultGraceMs,
  }
}

/** The stop of a task past its time limit (SIGTERM, then KILL after the grace). */
export function timeoutStop(timeoutMs: number, graceMs: number): Stopping {
  return { state: 'timed_out', stoppedBy: 'timeout', reason: `timed out after ${formatDuration(timeoutMs)}`, signal: 'SIGTERM', graceMs }
}

/** The stop of a task whose output passed its cap (`over` says how). */
export function outputCapStop(over: string, graceMs: number): Stopping {
  return { state: 'killed', stoppedBy: 'output-cap', reason: over, signal: 'SIGTERM', graceMs }
}

export function withNote(reason: string, note: string | undefined): string {
  return note ? `${reason}: ${note}` : reason
}

/** What the supervisor knows of a task when its leader has exited. */
export interface ExitFacts {
  /** Set when tend stopped the task. */
  stopping?: Stopping
  /** The leader is bubblewrap around the command (a signal death then reads 128+N). */
  wrapped: boolean
  /** After a stop: whether its first signal reached a live process of the task. */
  signalled?: boolean
  /** When the stop began: whether the leader caught or ignored its signal. */
  leaderHandles?: boolean
}

/**
 * How a task ended, and who stopped it. tend's own stops say who asked; a cgroup memory limit is
 * `memory-limit`; any other signal death is a signal tend did not send (`outside-signal`). Behind
 * bubblewrap a command's signal death arrives as exit code 128+N, the same as a command exiting
 * with that code: it is read as a signal only when tend stopped the task or the memory limit hit.
 */
export function decideEnding(facts: ExitFacts, result: SpawnExit, limits: { memory: string | null; pids: string | null }): Ending {
  const exitCode = result.exitCode ?? null
  const signal = result.signal ?? (exitCode !== null && exitCode > 128 && (facts.stopping || limits.memory) ? signalLabel(exitCode - 128) : null)
  const pidsNote = limits.pids ? `; ${limits.pids}` : ''
  // A stop that raced the task's own exit: nothing was left to signal, or the leader (which would
  // have died of the signal, not catching it) exited with a code of its own. It exited.
  const ownExit = result.signal === null && !limits.memory && (facts.signalled === false || (!facts.wrapped && facts.leaderHandles === false))
  if (facts.stopping && ownExit) return { state: 'exited', exitCode: exitCode ?? 0 }
  if (facts.stopping?.state === 'timed_out')
    return { state: 'timed_out', exitCode, signal, reason: `${facts.stopping.reason}${pidsNote}`, stoppedBy: 'timeout' }
  if (facts.stopping) return { state: 'killed', exitCode, signal, reason: `${facts.stopping.reason}${pidsNote}`, stoppedBy: facts.stopping.stoppedBy }
  if (limits.memory) return { state: 'killed', exitCode, signal: signal ?? 'SIGKILL', reason: `${limits.memory}${pidsNote}`, stoppedBy: 'memory-limit' }
  if (signal !== null) return outsideSignal(signal, exitCode, pidsNote)
  return { state: 'exited', exitCode: exitCode ?? 0 }
}

/** A signal tend did not send ended the task; the note says more (e.g. while no daemon ran). */
export function outsideSignal(signal: string, exitCode: number | null, note = ''): Ending {
  return { state: 'killed', exitCode, signal, reason: `killed by ${signal} from outside tend${note}`, stoppedBy: 'outside-signal' }
}

/** A task started to end with its daemon (endsWithDaemon), as a later daemon finds it. */
export const DAEMON_ENDED_LIFELINE = 'its daemon ended, and the task with it (it was started to end with its daemon)'
/** ... as its own daemon finds it, when its spawner's helper died (it takes such tasks along). */
export const SPAWNER_ENDED_LIFELINE = "tend's process spawner ended, and the task with it (it was started to end with its daemon)"
/** A task with a lease (one that may be retried elsewhere) whose daemon did not renew it in time. */
export const LEASE_RAN_OUT =
  'its lease ran out before its daemon renewed it (the daemon was frozen, or could not confirm ' +
  'its lock on the cluster job): its keeper killed it, so that it never runs beside a retry'
/** Why a restart (stop with keepTasks) stops such a task instead of handing it over. */
export const RESTART_STOPS_LIFELINE = 'daemon stopped to hand its tasks to the next one, which this task cannot go to (it was started to end with its daemon)'
