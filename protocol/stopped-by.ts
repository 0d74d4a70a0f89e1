import type { StoppedBy } from './task.js'

const WORDS: Record<StoppedBy, string> = {
  owner: 'owner (a kill by the agent session that owns the task)',
  operator: 'operator (a kill from the CLI or another unscoped client)',
  timeout: 'timeout (its time limit passed)',
  'output-cap': 'output-cap (its output reached the cap)',
  'memory-limit': 'memory-limit (it reached the memory limit of its sandbox)',
  'session-end': 'session-end (its agent session ended)',
  'daemon-stop': 'daemon-stop (the daemon was stopped)',
  'outside-signal': 'outside-signal (a signal tend did not send)',
  'cluster-lease': 'cluster-lease (its cluster worker lost its lease on the job: the task may run again elsewhere)',
}

/** `stoppedBy` for people: the value, then what it means (`timeout (its time limit passed)`). */
export function describeStoppedBy(stoppedBy: StoppedBy): string {
  return WORDS[stoppedBy] ?? stoppedBy
}
