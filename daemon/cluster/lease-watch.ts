import type { Redis } from 'ioredis'
import { withTimeout } from '../../protocol/index.js'

/** What a lease watch needs: a connection that fails at once while Redis is away (no offline queue). */
export interface LeaseWatchOptions {
  redis: Pick<Redis, 'multi'>
  /** The job's lock key in Redis (BullMQ's `<prefix>:<queue>:<id>:lock`). */
  lockKey: string
  /** This worker's token on the lock. */
  token: string
  /** How long a lock lives unrenewed (the worker's lockDuration). */
  lockMs: number
  /** The lease is about to be lost, or is: the task must stop now. Called once. */
  onLost: (why: string) => void
  /**
   * Redis confirmed the lock: the task may run until `until` (wall-clock ms), its expiry less half
   * the margin (this watch stops it at the whole margin: the keeper acts only when it cannot).
   */
  onConfirmed?: (until: number) => void
}

/** The share of a lock's life between two looks at it, and kept as a margin before its expiry. */
export const LEASE_SLICE = 1 / 10

/**
 * Watches this worker's lease on a job (BullMQ's lock, which the worker renews) for a task that
 * may be retried elsewhere: once the lock expires, another worker may take the job and run the
 * task again, so the task here must have stopped by then. The watch reads, every tenth of the
 * lock's life, whether Redis still holds the lock with this worker's token and until when; a tenth
 * of its life before the expiry last confirmed (Redis unreachable since), or as soon as it finds the
 * lock gone or another's, it calls onLost. The decision is made
 * on what Redis said, never on the worker's hope that its renewals went through. Each confirmation
 * is also handed to onConfirmed, for the task's keeper, which ends the task by itself should this
 * daemon stop confirming (frozen: then this watch cannot run either).
 */
export function watchLease(options: LeaseWatchOptions): () => void {
  const { lockMs } = options
  const margin = lockMs * LEASE_SLICE
  let lost = false
  let looking = false
  let lastConfirmedAt = Date.now()
  let deadline: NodeJS.Timeout | undefined
  const lose = (why: string) => {
    if (lost) return
    lost = true
    clearInterval(timer)
    clearTimeout(deadline)
    options.onLost(why)
  }
  // Stops the task a margin before the lock's expiry as last confirmed, unless a newer answer comes first.
  const expiresAt = (at: number) => {
    clearTimeout(deadline)
    deadline = setTimeout(() => lose(`Redis could not confirm its lock on the job for ${((Date.now() - lastConfirmedAt) / 1000).toFixed(1)} s`), Math.max(0, at - margin - Date.now()))
    deadline.unref()
  }
  const look = async () => {
    if (looking || lost) return
    looking = true
    const askedAt = Date.now()
    try {
      const answers = await withTimeout(options.redis.multi().get(options.lockKey).pttl(options.lockKey).exec(), lockMs * LEASE_SLICE, () => new Error(`no answer within ${lockMs * LEASE_SLICE} ms`))
      const holder = answers?.[0]?.[1]
      const remaining = answers?.[1]?.[1]
      if (holder !== options.token) return lose(holder ? 'another worker holds its job now' : 'its lock on the job expired')
      if (typeof remaining === 'number' && remaining > 0 && !lost) {
        lastConfirmedAt = askedAt
        expiresAt(askedAt + remaining)
        options.onConfirmed?.(askedAt + remaining - margin / 2)
      }
    } catch {
      // Redis did not answer: the lock is as last known, and the deadline stands.
    } finally {
      looking = false
    }
  }
  // The lock was taken a moment ago: half its life is a safe first bound (the task's first lease too).
  expiresAt(Date.now() + lockMs / 2 + margin)
  const timer = setInterval(() => void look(), lockMs * LEASE_SLICE)
  timer.unref()
  void look()
  return () => {
    lost = true
    clearInterval(timer)
    clearTimeout(deadline)
  }
}
