import { createHash } from 'node:crypto'
import { TendError, type StartTaskBody, type Task } from '../../../protocol/index.js'
import type { SubmissionIndex } from '../../store/submission-index.js'

/**
 * Idempotent submissions: a client sends the same `Idempotency-Key` with every try of one
 * `POST /v1/tasks` (a connection that reset, a daemon that crashed and was restarted), and every
 * try after the first answers the first task, so a command never runs twice. The key and a hash
 * of the request are kept in the task's record, so they outlive the daemon; once the task is
 * removed, in the spool's index of removed submissions, so they outlive the task.
 */
export class Submissions {
  private readonly byKey = new Map<string, { id: string; requestHash: string }>()
  private readonly inFlight = new Map<string, { requestHash: string; task: Promise<Task> }>()
  private removed: SubmissionIndex | null = null

  /** Relearns the keys of tasks loaded from the spool, and those of removed tasks from its index. */
  remember(tasks: readonly Task[], removed: SubmissionIndex): void {
    this.removed = removed
    for (const task of tasks) {
      if (task.idempotencyKey && task.requestHash) this.byKey.set(scoped(task.owner, task.idempotencyKey), { id: task.id, requestHash: task.requestHash })
    }
  }

  /**
   * Admits a submission once per key: `start` runs for the first one; a later one with the same
   * body answers the first task (`find`), with another body it is refused.
   */
  async admit(
    key: string | undefined,
    owner: string,
    body: StartTaskBody,
    find: (id: string) => Task | undefined,
    start: (submission: { idempotencyKey: string; requestHash: string } | null) => Promise<Task>,
  ): Promise<Task> {
    if (key === undefined) return start(null)
    const scopedKey = scoped(owner, key)
    const requestHash = hashRequest(body)
    const known = this.byKey.get(scopedKey)
    if (known) {
      if (known.requestHash !== requestHash) throw new TendError('TEND_ERR_IDEMPOTENCY_CONFLICT', { key, id: known.id })
      const task = find(known.id)
      if (task) return task
      // Removed since (rm, gc, the quota): it ran, and is never run again.
      throw new TendError('TEND_ERR_SUBMISSION_REMOVED', { key, id: known.id, outcome: this.removed?.find(owner, key)?.outcome ?? 'how is no longer known' })
    }
    const removed = this.removed?.find(owner, key)
    if (removed) {
      if (removed.requestHash !== requestHash) throw new TendError('TEND_ERR_IDEMPOTENCY_CONFLICT', { key, id: removed.id })
      throw new TendError('TEND_ERR_SUBMISSION_REMOVED', { key, id: removed.id, outcome: removed.outcome })
    }
    const running = this.inFlight.get(scopedKey)
    if (running) {
      if (running.requestHash !== requestHash) throw new TendError('TEND_ERR_IDEMPOTENCY_CONFLICT', { key, id: 'being submitted' })
      return running.task
    }
    const task = start({ idempotencyKey: key, requestHash })
    this.inFlight.set(scopedKey, { requestHash, task })
    try {
      const admitted = await task
      this.byKey.set(scopedKey, { id: admitted.id, requestHash })
      return admitted
    } finally {
      this.inFlight.delete(scopedKey)
    }
  }
}

function scoped(owner: string, key: string): string {
  return `${owner}\0${key}`
}

/** A hash of the request as sent (env values included, so never stored themselves). */
function hashRequest(body: StartTaskBody): string {
  return createHash('sha256').update(canonicalJson(body)).digest('base64url')
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, each]) => each !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([key, each]) => `${JSON.stringify(key)}:${canonicalJson(each)}`).join(',')}}`
  }
  return JSON.stringify(value)
}
