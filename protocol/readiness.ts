/**
 * When a task counts as ready (a server that is up): a line of its output matches `pattern`, something
 * in its network listens on `port`, or `url` answers 2xx/3xx from inside its network. Exactly one of
 * the three; `timeoutMs` (default READY_TIMEOUT_MS) is how long it may take from the start.
 */
export interface ReadyCondition {
  pattern?: string
  port?: number
  url?: string
  timeoutMs: number
}

/** How a task became ready: the kind of condition that held. */
export const READY_BY = ['pattern', 'port', 'url'] as const
export type ReadyBy = (typeof READY_BY)[number]

/** Why a task never became ready. */
export const READY_FAILURES = ['timed out', 'ended first'] as const
export type ReadyFailure = (typeof READY_FAILURES)[number]

/**
 * A task's readiness, in its record (`ready`): null while waiting; `{at, by, line?}` once the condition
 * held (`line`: the output line that matched, for a pattern); `{failed, at}` when it timed out or the
 * task ended first. Readiness is not a state: a ready task is still `running`. Absent: no condition.
 */
export type Readiness = { at: string; by: ReadyBy; line?: string } | { failed: ReadyFailure; at: string } | null

/** How long a readiness condition may take when none is given: 60 s. */
export const READY_TIMEOUT_MS = 60_000

export function isReady(readiness: Readiness | undefined): readiness is { at: string; by: ReadyBy; line?: string } {
  return readiness !== null && readiness !== undefined && 'by' in readiness
}
