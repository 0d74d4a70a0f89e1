import { writeSync } from 'node:fs'
import { formatLabels, visibleText, type Labels } from '../../protocol/index.js'

/** A change of a worker's link to its cluster's Redis, as its operator is told of it. */
export type RedisChange =
  | { event: 'connected' }
  | { event: 'lost'; code: string; error: string }
  | { event: 'back' }
  | { event: 'unreachable'; code: string; error: string }

export interface WorkerIdentity {
  /** The Redis URL as it may be shown (redactRedisUrl). */
  redis: string
  name: string
  labels: Labels
  queues: string[]
}

/**
 * The lines a foreground worker's operator reads on stderr: where it is connected, as whom, with
 * which labels and queues, then each change (Redis lost, Redis back), one line each; as text, or
 * as one JSON document a line (`tend worker --json`).
 */
export function workerNotices(identity: WorkerIdentity, format: 'text' | 'json', write: (line: string) => void = writeToStderr): (change: RedisChange) => void {
  // visibleText: an error's text is what Redis (or whoever answers in its place) said.
  return (change) => write(visibleText(format === 'json' ? JSON.stringify(noticeDocument(identity, change)) : noticeText(identity, change)))
}

function noticeDocument(identity: WorkerIdentity, change: RedisChange): Record<string, unknown> {
  if (change.event === 'connected') return { ...change, ...identity }
  return { ...change, redis: identity.redis }
}

function noticeText(identity: WorkerIdentity, change: RedisChange): string {
  const redis = identity.redis
  switch (change.event) {
    case 'connected': {
      return `tend worker: connected to ${redis} as ${identity.name} (labels ${formatLabels(identity.labels) || 'none'}; queues ${identity.queues.join(', ')})`
    }
    case 'lost':
      return `tend worker: lost the cluster's Redis ${redis} (${change.code}: ${change.error}); its tasks run on, and it rejoins when Redis answers`
    case 'back':
      return `tend worker: the cluster's Redis ${redis} is back`
    case 'unreachable':
      return (
        `tend worker: the cluster's Redis ${redis} is unreachable (${change.code}: ${change.error}` +
        `); serving local tasks, joining the cluster when it answers (retried every few seconds, logged at a slowing interval)`
      )
  }
}

/** Where the operator of a foreground worker reads; a closed stderr loses the line, never the worker. */
function writeToStderr(line: string): void {
  try {
    writeSync(2, `${line}\n`)
  } catch {
    // nowhere to say it: the daemon's log has it
  }
}
