import { basename } from 'node:path'
import { hostname } from 'node:os'
import type { Job, Worker } from 'bullmq'
import {
  aliveKey,
  isFinished,
  killChannel,
  queuesServed,
  redactRedisUrl,
  redisConnection,
  requestChannel,
  workersKey,
  type ClusterJobData,
  type WorkerEntry,
} from '../../protocol/index.js'
import type { WorkerStatus } from '../../protocol/index.js'
import { readClusterKey } from '../../protocol/sealed-env.js'
import type { WorkerDeps } from './worker-deps.js'
import { defaultWorkerName } from './worker-name.js'
import { runJob, type JobRunner, type Registry } from './run-job.js'
import { checkOrphanedJobs } from './orphan-check.js'
import { ClusterKills } from './cluster-kills.js'
import { clusterRequests } from './cluster-requests.js'
import { isConnectionError, RedisOutage, retryDelay, withinBound } from './redis-reconnect.js'
import { workerNotices } from './worker-notices.js'
import { answerForReturnedTasks, answerWhenSettled, attemptOfRecord, type AnswerOptions } from './answer-returned.js'

export interface ClusterWorker {
  name: string
  queues: string[]
  /** Takes no new job; the ones running go on. */
  pause: () => Promise<void>
  /**
   * Leaves the queue. Without keepTasks, once the daemon's tasks have ended (their jobs are
   * complete); with keepTasks, at once: the jobs stay active until the next daemon's worker takes
   * them again (BullMQ's stalled check) and finds their tasks running.
   */
  close: (options: { keepTasks: boolean }) => Promise<void>
  /** Its part in `tend status`: where, who, and its cluster tasks running now (an owner's only, when one asks). */
  status: (owner: string | null) => WorkerStatus
}

/**
 * The daemon's part in a cluster: a BullMQ worker on the queue of every subset of its labels.
 * Each job is a task, admitted here with the job's id as its id (the same id everywhere) and run
 * like any local task (sandbox, spool, kill and timeout guarantees); the job completes with the
 * task's final record once it has ended, whatever its exit. BullMQ is loaded only by a worker.
 */
export async function startClusterWorker(daemon: WorkerDeps): Promise<ClusterWorker> {
  const { config, log } = daemon
  const { Worker } = await import('bullmq')
  const name = config.clusterName ?? defaultWorkerName(hostname(), basename(config.layout.home))
  const queues = queuesServed(config.clusterQueue, config.clusterLabels)
  const connection = { ...redisConnection(config.clusterRedis!), retryStrategy: retryDelay }
  const { Redis } = await import('ioredis')
  // Every connection's failures go to one log of the outage (redis-reconnect.ts); its changes (connected,
  // lost, back) are said once each where the operator of a foreground worker reads (worker-notices.ts).
  const shownUrl = redactRedisUrl(config.clusterRedis!)
  const notice = workerNotices({ redis: shownUrl, name, labels: config.clusterLabels, queues }, config.clusterNotices)
  const outage = new RedisOutage({ shownUrl, log, notice })
  const registryClient = new Redis(connection)
  outage.watch(registryClient)
  const registry: Registry = async (worker) => {
    const announced = await registryClient.hget(workersKey(config.clusterQueue), worker)
    return announced ? (JSON.parse(announced) as WorkerEntry) : null
  }
  // Watches of jobs' locks must hear at once that Redis is away, not queue their questions until it is back.
  const lockClient = new Redis({ ...connection, enableOfflineQueue: false, maxRetriesPerRequest: 1 })
  lockClient.on('error', () => undefined)
  const clusterKills = new ClusterKills(daemon)
  // Checked when the settings were read: it opens the environment values jobs carry sealed.
  const key = config.clusterKeyFile === null ? null : readClusterKey(config.clusterKeyFile)
  const runner: JobRunner = {
    daemon,
    worker: name,
    registry,
    lock: { redis: lockClient, lockMs: config.clusterStallMs },
    kills: clusterKills,
    key,
    queue: config.clusterQueue,
  }
  const workers: Worker[] = queues.map((queue) => {
    const worker = new Worker(queue, (job: Job<ClusterJobData>, token?: string) => runJob(runner, job, token), {
      connection,
      concurrency: config.clusterConcurrency,
      autorun: true,
      // A worker that stops renewing its lock (it died, or lost Redis) is found within the stall interval.
      lockDuration: config.clusterStallMs,
      stalledInterval: config.clusterStallMs / 2,
      // A stalled job always comes back: the worker that takes it judges the attempt (run-job.ts).
      maxStalledCount: Number.MAX_SAFE_INTEGER,
    })
    // Redis going away is logged once per worker and retried by ioredis; running tasks go on.
    worker.on('error', (error) => (isConnectionError(error) ? outage.failed(error) : log.warn({ err: error, queue }, 'cluster queue error')))
    return worker
  })
  // What stays on this machine (output) is read through its console's API: started if it is not,
  // with a token of its own, announced where every client of the cluster finds it. A console that
  // cannot listen leaves the worker running tasks; their output is then read on this machine only.
  // Its token only reads: it sits in Redis, where whoever reads the queue finds it (docs/console.md).
  const opened = await daemon.console.open({}, 'read').catch((error: unknown) => {
    log.error({ err: error }, 'console not started: other machines cannot read the output of cluster tasks run here')
    return null
  })
  const entry: WorkerEntry = {
    name,
    origin: opened?.origin ?? null,
    token: opened?.token ?? null,
    labels: config.clusterLabels,
    startedAt: new Date().toISOString(),
  }
  // Kills come on a channel of their own: the worker holding the task stops it, the others ignore it.
  // The other changes asked of a task's worker (its stdin, its removal) come on another.
  const requests = clusterRequests({
    daemon,
    worker: name,
    queue: config.clusterQueue,
    key,
    reply: (channel, message) => registryClient.publish(channel, message),
  })
  const kills = new Redis(connection)
  outage.watch(kills)
  kills.on('message', (channel: string, message: string) =>
    channel === requestChannel(config.clusterQueue) ? requests.heard(message) : clusterKills.heard(message),
  )
  // Neither waits for Redis: a daemon whose Redis is away serves its socket and joins when it is back.
  // Such a command waits for Redis as long as it takes (it fails only when its connection is cut):
  // one that fails because a stop cut it says nothing of Redis, whose outage has its own log.
  let leaving = false
  const unlessLeaving = (what: string) => (error: unknown) => {
    if (!leaving) log.warn({ err: error }, what)
  }
  void registryClient.hset(workersKey(config.clusterQueue), { [name]: JSON.stringify(entry) }).catch(unlessLeaving('worker not announced'))
  void kills.subscribe(killChannel(config.clusterQueue), requestChannel(config.clusterQueue)).catch(unlessLeaving('kill channel not subscribed'))
  // A heartbeat that lives one stall interval: other workers tell from it whether anyone serves a queue.
  // It holds when it was set: `tend workers` shows it as the last heartbeat.
  const beat = () => void registryClient.set(aliveKey(config.clusterQueue, name), new Date().toISOString(), 'PX', config.clusterStallMs).catch(() => undefined)
  beat()
  const heartbeat = setInterval(beat, config.clusterStallMs / 3)
  heartbeat.unref()
  // A returning worker answers for its jobs: what ended here while it could not be asked (frozen,
  // killed, away from Redis) and was judged lost meanwhile gets its real end (answer-returned.ts).
  let closing = false
  const answering: AnswerOptions = { redis: registryClient, base: config.clusterQueue, worker: name, stallMs: config.clusterStallMs, log }
  void answerForReturnedTasks(answering, daemon.store.list({ all: true }), () => closing).catch(unlessLeaving('jobs of tasks that ended here not answered'))
  const stopAnswering = daemon.events.subscribe((event) => {
    if (!isFinished(event.task) || attemptOfRecord(event.task) === null) return
    void answerWhenSettled(answering, event.task, () => closing).catch((error: unknown) => {
      if (!leaving) log.warn({ err: error, taskId: event.taskId }, 'job of a task that ended here could not be answered')
    })
  })
  const orphans = checkOrphanedJobs({
    redis: registryClient,
    redisUrl: config.clusterRedis!,
    base: config.clusterQueue,
    served: queues,
    stallMs: config.clusterStallMs,
    registry,
    log,
  })
  log.info({ worker: name, queues }, 'cluster worker started')
  return {
    name,
    queues,
    status: (owner) => {
      const ids = daemon.store
        .list({ owner: owner ?? undefined })
        .filter((task) => task.state === 'running' && attemptOfRecord(task) !== null)
        .map((task) => task.id)
      return { redis: shownUrl, queue: config.clusterQueue, name, labels: config.clusterLabels, running: { count: ids.length, ids } }
    },
    pause: async () => {
      leaving = true
      kills.disconnect()
      await Promise.all(workers.map((worker) => worker.pause(true)))
    },
    close: async ({ keepTasks }) => {
      leaving = true
      closing = true
      stopAnswering()
      clearInterval(heartbeat)
      outage.close()
      // A command to a Redis that is away waits for it (BullMQ's workers need that): a stop waits on
      // none. Redis not answering now: every connection is cut at once, failing what waits on it.
      // Answering: the jobs complete, for one stall interval at most (past it, the others judge them).
      const redisAnswers = registryClient.status === 'ready'
      const cut = () => {
        registryClient.disconnect()
        lockClient.disconnect()
        for (const worker of workers) void worker.disconnect().catch(() => undefined)
      }
      if (!redisAnswers) cut()
      await withinBound(
        Promise.all([...workers.map((worker) => worker.close(keepTasks || !redisAnswers)), orphans.stop({ answering: redisAnswers })]),
        config.clusterStallMs,
        cut,
      )
      registryClient.disconnect()
      lockClient.disconnect()
    },
  }
}
