import type { Redis } from 'ioredis'

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
}

/**
 * Watches this worker's lease on a job (BullMQ's lock, which the worker renews) for a task that
 * may be retried elsewhere: once the lock expires, another worker may take the job and run the
 * task again, so the task here must have stopped by then. The watch reads, every fifth of the
 * lock's life, whether Redis still holds the lock with this worker's token and until when; when
 * it has not been able to confirm the lock for so long that it would expire within a quarter of
 * its life (Redis unreachable), or finds it gone or another's, it calls onLost. The decision is
 * made on what Redis said, never on the worker's hope that its renewals went through.
 */
export function watchLease(options: LeaseWatchOptions): () => void {
  const { lockMs } = options
  const margin = lockMs / 4
  // Until the first answer, the lock is known to live from its taking: a full lockMs from now at worst.
  let expiresAt = Date.now() + lockMs
  let lost = false
  let looking = false
  const lose = (why: string) => {
    if (lost) return
    lost = true
    clearInterval(timer)
    options.onLost(why)
  }
  const look = async () => {
    if (looking || lost) return
    looking = true
    const askedAt = Date.now()
    try {
      const answers = await withTimeout(options.redis.multi().get(options.lockKey).pttl(options.lockKey).exec(), lockMs / 5)
      const holder = answers?.[0]?.[1]
      const remaining = answers?.[1]?.[1]
      if (holder !== options.token) return lose(holder ? 'another worker holds its job now' : 'its lock on the job expired')
      if (typeof remaining === 'number' && remaining > 0) expiresAt = askedAt + remaining
    } catch {
      // Redis did not answer: the lock is as last known.
    } finally {
      looking = false
    }
    if (!lost && Date.now() >= expiresAt - margin) lose(`Redis could not confirm its lock on the job for ${Math.round((Date.now() - (expiresAt - lockMs)) / 1000)} s`)
  }
  const timer = setInterval(() => void look(), lockMs / 5)
  timer.unref()
  return () => {
    lost = true
    clearInterval(timer)
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
  })
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer))
}
