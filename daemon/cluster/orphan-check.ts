import type { Job, Queue } from 'bullmq'
import type { Redis } from 'ioredis'
import {
  aliveKey,
  LOST_PREFIX,
  queuesKey,
  redisConnection,
  requirementsOf,
  serves,
  workersKey,
  type ClusterJobData,
  type ClusterProgress,
  type WorkerEntry,
} from '../../protocol/index.js'
import type { Logger } from 'pino'
import { lookAtEarlierAttempt, type Registry } from './run-job.js'

export interface OrphanCheckOptions {
  redis: Redis
  redisUrl: string
  base: string
  /** The queues this worker serves: BullMQ's own stalled check looks after those. */
  served: string[]
  stallMs: number
  registry: Registry
  log: Logger
}

/**
 * BullMQ's stalled-job check runs in the workers of a queue; a queue that only a dead worker
 * served (tasks that required its labels) would keep that worker's jobs active forever, their
 * tasks neither ended nor run again. Every worker therefore also looks, each half stall interval,
 * at the queues no live worker serves (a worker is live while its heartbeat key exists): an
 * active job whose lock has expired, on two looks in a row, was lost with its worker. When that
 * worker does not answer for it either, the job is failed as lost, or, when the task may be
 * retried, put back on its queue for the next worker that serves it (which runs the next attempt).
 */
export function checkOrphanedJobs(options: OrphanCheckOptions): { stop: (how: { answering: boolean }) => Promise<void> } {
  const { redis, base, stallMs, log } = options
  const queues = new Map<string, Queue>()
  /** Jobs found without a lock at the last look, by queue. */
  let suspects = new Map<string, Set<string>>()
  let running: Promise<void> | undefined

  const queueOf = async (name: string): Promise<Queue> => {
    let queue = queues.get(name)
    if (!queue) {
      const { Queue } = await import('bullmq')
      queue = new Queue(name, { connection: redisConnection(options.redisUrl) })
      queue.on('error', () => undefined)
      queues.set(name, queue)
    }
    return queue
  }

  const unserved = async (): Promise<string[]> => {
    const all = await redis.smembers(queuesKey(base))
    const workers = Object.values(await redis.hgetall(workersKey(base))).map((each) => JSON.parse(each) as WorkerEntry)
    const alive = new Set<string>()
    for (const worker of workers) if (await redis.exists(aliveKey(base, worker.name))) alive.add(worker.name)
    return all.filter((name) => {
      if (options.served.includes(name)) return false
      const requirements = requirementsOf(base, name)
      return requirements !== null && !workers.some((worker) => alive.has(worker.name) && serves(worker.labels, requirements))
    })
  }

  const judge = async (queue: Queue, id: string): Promise<void> => {
    const job = (await queue.getJob(id)) as Job<ClusterJobData> | undefined
    if (!job || (await job.getState()) !== 'active') return
    const progress = typeof job.progress === 'object' && job.progress !== null ? (job.progress as unknown as ClusterProgress) : null
    // A job with no report was never admitted by a worker: nothing ran, it goes back to wait.
    const seen = progress ? await lookAtEarlierAttempt(id, progress.worker, options.registry) : { lost: 'no worker admitted it' }
    // Its worker still runs it (it lost Redis, not its task): it completes the job when Redis is back.
    if (seen === 'running') return
    if ('ended' in seen) {
      await job.moveToCompleted(seen.ended, '0', false)
      return log.info({ taskId: id, queue: queue.name }, 'job of a worker that is gone completed with the end its task had there')
    }
    if (!progress || (progress.attempt ?? 1) <= (job.data.retries ?? 0)) {
      // '0': no lock to check, the lock is gone.
      await job.moveToWait('0')
      log.warn(
        { taskId: id, queue: queue.name, worker: progress?.worker },
        'job of a worker that is gone put back on its queue: the next worker that serves it runs the next attempt',
      )
    } else {
      await job.moveToFailed(new Error(`${LOST_PREFIX}${seen.lost}; no live worker serves its queue`), '0', false)
      log.warn({ taskId: id, queue: queue.name, worker: progress.worker }, 'job of a worker that is gone failed as lost')
    }
  }

  const look = async (): Promise<void> => {
    const found = new Map<string, Set<string>>()
    for (const name of await unserved()) {
      const queue = await queueOf(name)
      const lockless = new Set<string>()
      for (const id of await redis.lrange(`${queue.qualifiedName}:active`, 0, -1)) {
        if (await redis.exists(`${queue.qualifiedName}:${id}:lock`)) continue
        lockless.add(id)
        if (suspects.get(name)?.has(id))
          await judge(queue, id).catch((error: unknown) => log.warn({ err: error, taskId: id }, 'job of a worker that is gone could not be judged'))
      }
      found.set(name, lockless)
    }
    suspects = found
  }

  const timer = setInterval(() => {
    if (running) return
    running = look()
      .catch(() => undefined)
      .finally(() => (running = undefined))
  }, stallMs / 2)
  timer.unref()
  return {
    stop: async ({ answering }) => {
      clearInterval(timer)
      await running
      // Closing asks Redis (QUIT): one that does not answer is only disconnected.
      await Promise.all([...queues.values()].map((queue) => (answering ? queue.close() : queue.disconnect()).catch(() => undefined)))
    },
  }
}
