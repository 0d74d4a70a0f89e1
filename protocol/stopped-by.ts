import { STOPPED_BY, type StoppedBy } from './task.js'

const WORDS: Record<StoppedBy, string> = {
  owner: 'owner (a kill by the agent session that owns the task)',
  operator: 'operator (a kill from the CLI or another unscoped client)',
  timeout: 'timeout (its time limit passed)',
  'output-cap': 'output-cap (its output reached the cap)',
  'memory-limit': 'memory-limit (it reached the memory limit of its sandbox)',
  'session-end': 'session-end (its agent session ended)',
  'daemon-stop': 'daemon-stop (the daemon was stopped)',
  'outside-signal': 'outside-signal (a signal tend did not send)',
  'lease-expired':
    'lease-expired (its daemon could no longer confirm the lease it ran under, e.g. a cluster worker its lock on the job: the task may run again elsewhere)',
}

/** Values older records hold, each with the one it is read as now. */
const RENAMED: Record<string, StoppedBy> = { 'cluster-lease': 'lease-expired' }

/** A recorded stoppedBy as it reads now: an older name becomes its current one; anything else is unchanged. */
export function currentStoppedBy<T>(recorded: T): T | StoppedBy {
  return typeof recorded === 'string' && Object.hasOwn(RENAMED, recorded) ? RENAMED[recorded] : recorded
}

/** Every stoppedBy a record may hold: the current ones and the older names still read. */
export const RECORDED_STOPPED_BY: readonly string[] = [...STOPPED_BY, ...Object.keys(RENAMED)]

/** `stoppedBy` for people: the value, then what it means (`timeout (its time limit passed)`). */
export function describeStoppedBy(stoppedBy: StoppedBy): string {
  return WORDS[stoppedBy] ?? stoppedBy
}
