import {
  TendError,
  type StoppedBy,
  type FailedTask,
  type FinishedTask,
  type KilledTask,
  type QueuedTask,
  type RunningTask,
  type Task,
  type TaskBase,
  type LostTask,
  type RanAs,
} from '../../protocol/index.js'

/** How a started task ended, as the supervisor saw it. */
export type Ending =
  | { state: 'exited'; exitCode: number }
  | { state: 'killed'; exitCode: number | null; signal: string | null; reason: string; stoppedBy: StoppedBy }
  | { state: 'timed_out'; exitCode: number | null; signal: string | null; reason: string; stoppedBy: 'timeout' }

function illegal(task: Task, to: Task['state']): TendError {
  return new TendError('TEND_ERR_ILLEGAL_TRANSITION', { id: task.id, from: task.state, to })
}

/**
 * Records are copied by a leading spread and named fields, never a spread after other fields
 * (`{ a, ...b }`): V8 builds such a literal property by property, and a hidden class made that way
 * is not shared. A copy of such a record gets a class of its own too, ~0.8 KiB kept as long as
 * the record is.
 */
export function createQueuedTask(base: TaskBase): QueuedTask {
  return { ...base, state: 'queued', startedAt: null, pid: null, endedAt: null, exitCode: null, signal: null, reason: null, stoppedBy: null }
}

export function markStarted(task: Task, pid: number, at: Date, keeper: RunningTask['keeper'] = null, bootId?: string, ranAs?: RanAs): RunningTask {
  if (task.state !== 'queued') throw illegal(task, 'running')
  const startedAt = at.toISOString()
  // Literals, not a spread of an optional field: see createQueuedTask.
  if (ranAs) return bootId ? { ...task, state: 'running', pid, startedAt, keeper, bootId, ranAs } : { ...task, state: 'running', pid, startedAt, keeper, ranAs }
  return bootId ? { ...task, state: 'running', pid, startedAt, keeper, bootId } : { ...task, state: 'running', pid, startedAt, keeper }
}

export function markEnded(task: Task, ending: Ending, outputBytes: number, at: Date): FinishedTask {
  if (task.state !== 'running') throw illegal(task, ending.state)
  return endsReadiness(endedAs(task, ending, outputBytes, at), at)
}

function endedAs(task: RunningTask, ending: Ending, outputBytes: number, at: Date): FinishedTask {
  const endedAt = at.toISOString()
  if (ending.state === 'exited')
    return { ...task, state: 'exited', exitCode: ending.exitCode, signal: null, reason: null, stoppedBy: null, endedAt, outputBytes }
  if (ending.state === 'timed_out')
    return {
      ...task,
      state: 'timed_out',
      exitCode: ending.exitCode,
      signal: ending.signal,
      reason: ending.reason,
      stoppedBy: ending.stoppedBy,
      endedAt,
      outputBytes,
    }
  return {
    ...task,
    state: 'killed',
    exitCode: ending.exitCode,
    signal: ending.signal,
    reason: ending.reason,
    stoppedBy: ending.stoppedBy,
    endedAt,
    outputBytes,
  }
}

/**
 * A task that never ran: it could not be started (stoppedBy null), or the daemon stopped before it
 * could (`daemon-stop`).
 */
export function markFailed(task: Task, reason: string, at: Date, stoppedBy: FailedTask['stoppedBy'] = null): FailedTask {
  if (task.state !== 'queued') throw illegal(task, 'failed')
  return endsReadiness({ ...task, state: 'failed', startedAt: null, pid: null, exitCode: null, signal: null, reason, stoppedBy, endedAt: at.toISOString() }, at)
}

/** A queued task stopped before it started, by whoever killed it. */
export function markCancelled(task: Task, reason: string, at: Date, stoppedBy: StoppedBy): KilledTask {
  if (task.state !== 'queued') throw illegal(task, 'killed')
  return endsReadiness({ ...task, state: 'killed', startedAt: null, pid: null, exitCode: null, signal: null, reason, stoppedBy, endedAt: at.toISOString() }, at)
}

/** Nobody stopped it: the daemon (or the machine, or its keeper) went away while it ran. */
export function markLost(task: Task, reason: string, outputBytes: number, at: Date): LostTask {
  if (task.state !== 'running') throw illegal(task, 'lost')
  return endsReadiness({ ...task, state: 'lost', exitCode: null, signal: null, reason, stoppedBy: null, outputBytes, endedAt: at.toISOString() }, at)
}

/**
 * An ending of a task still waiting for its readiness condition records that it never came (`ended
 * first`), in the same version: no record ends with `ready: null`. Unchanged otherwise.
 */
function endsReadiness<T extends Task>(ended: T, at: Date): T {
  if (ended.ready !== null) return ended
  // Object.assign, not a spread after fields: see createQueuedTask.
  return Object.assign({}, ended, { ready: { failed: 'ended first' as const, at: at.toISOString() } })
}

/** An ending with the bytes of output its keeper could not write (a terminal's, on a full disk); unchanged when none. */
export function withOutputLoss<T extends Task>(task: T, lostBytes: number | undefined): T {
  if (!lostBytes) return task
  // Object.assign, not a spread after fields: see createQueuedTask.
  return Object.assign({}, task, { outputLostBytes: lostBytes })
}

/** A running task's stdin pipe after its end of input was sent; nothing else changes. */
export function markStdinClosed(task: Task): Task {
  if (task.state !== 'running' || task.stdin !== 'pipe') return task
  return { ...task, stdin: 'closed' }
}
