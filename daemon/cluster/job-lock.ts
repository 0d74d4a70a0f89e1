import { setTimeout as delay } from 'node:timers/promises'
import type { Redis } from 'ioredis'
import { watchFence, type FenceOptions } from '../spawn/keeper-lease.js'

/** The job's lock in Redis as a fence: a connection that fails at once while Redis is away (no offline queue), and the lock's life. */
export interface JobLock {
  redis: Pick<Redis, 'multi'>
  /** How long a lock lives unrenewed (the worker's lockDuration), in ms. */
  lockMs: number
}

export interface JobLockWatch extends JobLock, Pick<FenceOptions, 'onLost' | 'onConfirmed'> {
  /** The job's lock key in Redis (BullMQ's `<prefix>:<queue>:<id>:lock`). */
  lockKey: string
  /** This worker's token on the lock. */
  token: string
}

/**
 * Watches this worker's lock on a job (BullMQ's, which the worker renews) as the fence of a task
 * that may be retried elsewhere: once the lock expires, another worker may take the job and run the
 * task again (watchFence in spawn/keeper-lease.ts says when the task is stopped). Redis is asked,
 * in one round trip, who holds the lock and for how long.
 */
export function watchJobLock(options: JobLockWatch): () => void {
  const { redis, lockKey, token } = options
  return watchFence({
    ttlMs: options.lockMs,
    confirm: async () => {
      const answers = await redis.multi().get(lockKey).pttl(lockKey).exec()
      const holder = answers?.[0]?.[1]
      const remaining = answers?.[1]?.[1]
      if (holder !== token) return { held: false, why: holder ? 'another worker holds its job now' : 'its lock on the job expired' }
      return { held: true, remainingMs: typeof remaining === 'number' ? remaining : 0 }
    },
    unconfirmedWhy: (silentMs) => `Redis could not confirm its lock on the job for ${(silentMs / 1000).toFixed(1)} s`,
    onLost: options.onLost,
    onConfirmed: options.onConfirmed,
  })
}

/** Whether Redis still holds the job's lock with this worker's token: asked until Redis answers. */
export async function stillHeld(lock: JobLock, lockKey: string, token: string): Promise<boolean> {
  for (;;) {
    const answers = await lock.redis
      .multi()
      .get(lockKey)
      .exec()
      .catch(() => null)
    if (answers) return answers[0]?.[1] === token
    await delay(lock.lockMs / 5)
  }
}
