import { basename } from 'node:path'
import { hostname } from 'node:os'
import type { Job, Worker } from 'bullmq'
import { isFinished, killChannel, REQUESTED_STOPS, LOST_PREFIX, queuesServed, redisConnection, workersKey, type ClusterJobData, type ClusterKill, type ClusterProgress, type Task, type WorkerEntry } from '../../protocol/index.js'
import { StartTaskBody } from '../../protocol/schemas.js'
import { compileValidator } from '../precompiled/schema-code.js'
import type { DaemonContext } from '../context.js'
import { normalizeSignal } from '../tasks/signals.js'

/** How long a job's wait for its task's end is, at most, between looks (the end is announced; this is a bound). */
const FINISH_WAIT_MS = 60_000

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
}

/**
 * The daemon's part in a cluster: a BullMQ worker on the queue of every subset of its labels.
 * Each job is a task, admitted here with the job's id as its id (the same id everywhere) and run
 * like any local task (sandbox, spool, kill and timeout guarantees); the job completes with the
 * task's final record once it has ended, whatever its exit. BullMQ is loaded only by a worker.
 */
export async function startClusterWorker(context: DaemonContext): Promise<ClusterWorker> {
  const { config, log } = context
  const { Worker } = await import('bullmq')
  const name = config.clusterName ?? `${hostname()}:${basename(config.layout.home)}`
  const queues = queuesServed(config.clusterQueue, config.clusterLabels)
  const connection = redisConnection(config.clusterRedis!)
  const { Redis } = await import('ioredis')
  const registryClient = new Redis(connection)
  registryClient.on('error', (error) => log.warn({ err: error }, 'cluster registry error'))
  const registry: Registry = async (worker) => {
    const announced = await registryClient.hget(workersKey(config.clusterQueue), worker)
    return announced ? (JSON.parse(announced) as WorkerEntry) : null
  }
  const workers: Worker[] = queues.map((queue) => {
    const worker = new Worker(queue, (job: Job<ClusterJobData>) => runJob(context, name, job, registry), {
      connection,
      concurrency: config.clusterConcurrency,
      autorun: true,
      // A worker that stops renewing its lock (it died, or lost Redis) is found within the stall interval.
      lockDuration: config.clusterStallMs,
      stalledInterval: config.clusterStallMs / 2,
      // A stalled job always comes back: the worker that takes it decides (endOnEarlierWorker).
      maxStalledCount: Number.MAX_SAFE_INTEGER,
    })
    // Redis going away is logged once per worker and retried by ioredis; running tasks go on.
    worker.on('error', (error) => log.warn({ err: error, queue }, 'cluster queue error'))
    return worker
  })
  // What stays on this machine (output) is read through its console's API: started if it is not,
  // with a token of its own, announced where every client of the cluster finds it. A console that
  // cannot listen leaves the worker running tasks; their output is then read on this machine only.
  const opened = await context.console!.open().catch((error: unknown) => {
    log.error({ err: error }, 'console not started: other machines cannot read the output of cluster tasks run here')
    return null
  })
  const entry: WorkerEntry = { name, origin: opened?.origin ?? null, token: opened?.token ?? null, labels: config.clusterLabels, startedAt: new Date().toISOString() }
  // Kills come on a channel of their own: the worker holding the task stops it, the others ignore it.
  const kills = new Redis(connection)
  kills.on('error', (error) => log.warn({ err: error }, 'cluster kill channel error'))
  kills.on('message', (_channel: string, message: string) => void killFromCluster(context, message))
  // Neither waits for Redis: a daemon whose Redis is away serves its socket and joins when it is back.
  void registryClient.hset(workersKey(config.clusterQueue), { [name]: JSON.stringify(entry) }).catch((error: unknown) => log.warn({ err: error }, 'worker not announced'))
  void kills.subscribe(killChannel(config.clusterQueue)).catch((error: unknown) => log.warn({ err: error }, 'kill channel not subscribed'))
  log.info({ worker: name, queues }, 'cluster worker started')
  return {
    name,
    queues,
    pause: async () => {
      kills.disconnect()
      await Promise.all(workers.map((worker) => worker.pause(true)))
    },
    close: async ({ keepTasks }) => {
      await Promise.all(workers.map((worker) => worker.close(keepTasks)))
      registryClient.disconnect()
    },
  }
}

/** A worker's announcement in the cluster, or null. */
type Registry = (name: string) => Promise<WorkerEntry | null>

/** How long the look at an earlier worker may take before it counts as gone. */
const EARLIER_WORKER_TIMEOUT_MS = 5000

/**
 * The task's final record from the worker that ran it first, once it has ended there; the job
 * fails as lost (no retry) when that worker does not answer or does not have it.
 */
async function endOnEarlierWorker(id: string, earlier: string, registry: Registry): Promise<Task> {
  const { UnrecoverableError } = await import('bullmq')
  const entry = await registry(earlier)
  if (entry?.origin && entry.token) {
    const ask = async (path: string, waitMs = 0): Promise<Task | null> => {
      const answer = await fetch(`${entry.origin}${path}`, { headers: { authorization: `Bearer ${entry.token}` }, signal: AbortSignal.timeout(EARLIER_WORKER_TIMEOUT_MS + waitMs) }).catch(() => null)
      if (!answer?.ok) return null
      const body = (await answer.json()) as Task | { task: Task }
      return 'task' in body ? body.task : body
    }
    let task = await ask(`/v1/tasks/${id}`)
    while (task && !isFinished(task)) task = await ask(`/v1/tasks/${id}/wait?timeoutMs=25000`, 25_000)
    if (task) return task
  }
  throw new UnrecoverableError(`${LOST_PREFIX}worker ${earlier} stopped answering while it ran the task (its lock on the job expired), and the task cannot be found there`)
}

/** Stops the task a published kill names, if it is this daemon's and has not ended. */
async function killFromCluster(context: DaemonContext, message: string): Promise<void> {
  let kill: ClusterKill
  try {
    kill = JSON.parse(message) as ClusterKill
  } catch {
    return context.log.warn({ message: message.slice(0, 200) }, 'cluster kill that is not JSON, ignored')
  }
  const task = typeof kill.id === 'string' ? context.store.find(kill.id) : undefined
  if (!task || isFinished(task)) return
  context.log.info({ taskId: task.id }, 'task killed through the cluster')
  try {
    // Whoever can publish on the channel can say who asks: a stoppedBy tend does not know is the operator's.
    const stoppedBy = REQUESTED_STOPS.find((each) => each === kill.stoppedBy) ?? 'operator'
    await context.supervisor.kill(task.id, { signal: normalizeSignal(kill.signal), graceMs: kill.graceMs, note: typeof kill.reason === 'string' ? kill.reason.slice(0, 500) : undefined, stoppedBy })
  } catch (error) {
    context.log.error({ err: error, taskId: task.id }, 'cluster kill failed')
  }
}

async function runJob(context: DaemonContext, worker: string, job: Job<ClusterJobData>, registry: Registry): Promise<Task> {
  const id = job.id!
  // Whoever can write to the cluster's Redis can put a job there: its request is checked as the
  // socket checks a POST /v1/tasks body, and a bad one fails its job, naming what is wrong.
  const request = job.data.request as unknown as StartTaskBody
  const validate = compileValidator('body', StartTaskBody)
  if (!validate(request)) {
    const { UnrecoverableError } = await import('bullmq')
    const problems = (validate.errors ?? []).map((error) =>
      error.keyword === 'additionalProperties' ? `unknown field ${String(error.params.additionalProperty)}` : `${error.instancePath.slice(1) || 'request'} ${error.message}`,
    )
    throw new UnrecoverableError(`the task's start request is not valid: ${problems.join('; ')}`)
  }
  const earlier = typeof job.progress === 'object' && job.progress !== null ? (job.progress as unknown as ClusterProgress).worker : null
  // Taken before by a worker whose lock on it expired (it died, or Redis was away): the task may
  // still run there, and is never started a second time. Its end is awaited there, or it is lost.
  if (earlier && earlier !== worker && !context.store.find(id)) return endOnEarlierWorker(id, earlier, registry)
  // The same job delivered again (a stalled check) finds the task it started.
  const task = await context.supervisor.start(request, { id, idempotencyKey: `cluster-${id}` })
  await job.updateProgress({ worker, state: task.state, pid: task.pid } satisfies ClusterProgress)
  const started = await context.store.whenState(id, (each) => each.state !== 'queued', FINISH_WAIT_MS)
  if (!isFinished(started)) await job.updateProgress({ worker, state: started.state, pid: started.pid } satisfies ClusterProgress)
  let current = started
  while (!isFinished(current)) current = await context.store.whenFinished(id, FINISH_WAIT_MS)
  return current
}
