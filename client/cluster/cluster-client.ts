import type { Queue, QueueEvents } from 'bullmq'
import {
  queueFor,
  queuesKey,
  ownerTasksKey,
  taskQueuesKey,
  TendError,
  withTimeout,
  DEFAULT_CLUSTER_QUEUE,
  DEFAULT_OWNER,
  MAX_CLUSTER_RETRIES,
  KILLED_WHILE_QUEUED,
  killChannel,
  killedRecordsKey,
  redisConnection,
  redactRedisUrl,
  INPUT_MAX_BYTES,
  type TaskInputResult,
  type ClusterKill,
  workersKey,
  type WorkerEntry,
  type ClusterJobData,
  type Labels,
  type RequestedStop,
  type Task,
} from '../../protocol/index.js'
// Sealing loads node:crypto: kept out of protocol/index, which every CLI run loads.
import { CLUSTER_KEY_HOWTO, readClusterKey, seal, sealEnv } from '../../protocol/sealed-env.js'
import { newTaskId } from '../../protocol/task-id.js'
import { startRequestBody, TendClient, type StartOptions } from '../client.js'
import { askWorker, type RequestRedis } from './cluster-requests.js'
import { describeJob, killedWhileQueuedRecord, nameAndCommand, recordOfJob, type ClusterJob, type ClusterTask } from './cluster-records.js'
import { liveEntries, liveWorkers, type LiveWorker } from './cluster-workers.js'

export type { ClusterTask }

export interface ClusterStartOptions extends StartOptions {
  /** Labels the worker must have, each name=value. */
  require?: Labels
  /**
   * How many times the task runs again, on another worker, when it is lost with its worker (the
   * worker died, or lost Redis for the stall interval): 0 to MAX_CLUSTER_RETRIES. Such a task
   * ends with its worker's daemon, so that two attempts never run at once. Default 0.
   */
  retries?: number
}

/**
 * Tasks on a cluster's shared BullMQ queue (docs/cluster.md): submitted from any machine that
 * reaches Redis, run by the workers whose labels match, followed by their id. BullMQ is loaded
 * only here.
 */
export interface ClusterClientOptions {
  /**
   * The cluster key's file (32 random bytes, 0600): a task's environment values are sealed with
   * it before they reach Redis, and its stdin input too. Default: none (a task with environment
   * values is then refused).
   */
  keyFile?: string
}

export class ClusterClient {
  private readonly queues = new Map<string, { queue: Queue; events: QueueEvents | null; eventsReady?: Promise<void> }>()
  private bullmq: typeof import('bullmq') | undefined
  private readonly workerClients = new Map<string, Promise<TendClient>>()
  readonly keyFile: string | undefined
  private key: Buffer | undefined

  constructor(
    readonly redisUrl: string,
    readonly base: string = DEFAULT_CLUSTER_QUEUE,
    options: ClusterClientOptions = {},
  ) {
    if (!/^rediss?:\/\//.test(redisUrl))
      throw new TendError('TEND_ERR_CONFIG_INVALID', {
        detail: `cluster: expected a redis:// or rediss:// URL, got ${JSON.stringify(redactRedisUrl(redisUrl))}`,
      })
    this.keyFile = options.keyFile
  }

  /** Puts the task on the queue of its requirements; answers once Redis holds it. */
  async start(options: ClusterStartOptions): Promise<ClusterTask> {
    const retries = options.retries ?? 0
    if (!Number.isInteger(retries) || retries < 0 || retries > MAX_CLUSTER_RETRIES) {
      throw new TendError('TEND_ERR_VALIDATION', {
        detail: `retries: expected a whole number from 0 to ${MAX_CLUSTER_RETRIES}, got ${JSON.stringify(options.retries)}`,
      })
    }
    const id = newTaskId()
    const { env, ...request } = startRequestBody(options)
    // Environment values never reach Redis in the clear: sealed for this task, or refused.
    const sealedEnv =
      env && Object.keys(env).length > 0 ? sealEnv(env as Record<string, string>, this.clusterKey('a task with environment values'), id) : undefined
    const name = queueFor(this.base, options.require ?? {})
    const { queue } = await this.queue(name)
    const data: ClusterJobData = {
      request,
      requirements: options.require ?? {},
      submittedAt: new Date().toISOString(),
      ...(retries > 0 ? { retries } : {}),
      ...(sealedEnv ? { sealedEnv } : {}),
    }
    const redis = await this.redis()
    await redis.sadd(queuesKey(this.base), name)
    await redis.sadd(ownerTasksKey(this.base, options.owner ?? DEFAULT_OWNER), id)
    await redis.hset(taskQueuesKey(this.base), { [id]: name })
    await queue.add('task', data, { jobId: id, removeOnComplete: false, removeOnFail: false })
    return {
      id,
      queue: name,
      owner: options.owner ?? DEFAULT_OWNER,
      ...nameAndCommand(data),
      state: 'queued',
      worker: null,
      task: null,
      reason: null,
      attempt: 1,
      earlier: [],
    }
  }

  /** The cluster's live workers (their heartbeat is there), with their running and queued counts. */
  async workers(): Promise<LiveWorker[]> {
    return liveWorkers({ base: this.base, redis: await this.redis(), queue: async (name) => (await this.queue(name)).queue })
  }

  /** The live workers' names and labels only: what a submission's requirements are checked against. */
  async workerLabels(): Promise<Array<Pick<LiveWorker, 'name' | 'labels'>>> {
    return (await liveEntries({ base: this.base, redis: await this.redis() })).map(({ entry }) => ({ name: entry.name, labels: entry.labels }))
  }

  async get(id: string): Promise<ClusterTask> {
    const found = await this.job(id)
    if (!found) return this.killedWhileQueued(id)
    return describeJob(id, found.name, found.job, found.state)
  }

  /**
   * The task's record: its final one once it has ended; while it runs, the one its worker holds
   * (asked over the worker's API, with the live output size); else what the queue knows of it.
   */
  async record(id: string): Promise<{ cluster: ClusterTask; task: Task }> {
    const found = await this.job(id)
    if (!found) {
      const cluster = await this.killedWhileQueued(id)
      return { cluster, task: cluster.task! }
    }
    const cluster = describeJob(id, found.name, found.job, found.state)
    if (cluster.task) return { cluster, task: cluster.task }
    if (cluster.worker) {
      const live = await this.clientOfWorker(cluster.worker, id)
        .then((client) => client.get(id))
        .catch(() => null)
      if (live) return { cluster, task: live }
    }
    return { cluster, task: recordOfJob(id, found.job, cluster) }
  }

  /**
   * Stops a cluster task: one still waiting is taken off the queue; one a worker runs is stopped
   * there, its whole tree, through the kill channel. Resolves with where it is once it has ended
   * (or after the grace and 30 s more).
   */
  async kill(id: string, options: { signal?: string | number; graceMs?: number; reason?: string; stoppedBy?: RequestedStop } = {}): Promise<ClusterTask> {
    const found = await this.job(id)
    if (!found) return this.killedWhileQueued(id)
    const { job, name, state } = found
    if (state === 'waiting' || state === 'delayed' || state === 'prioritized' || state === 'waiting-children') {
      // Taken off the queue if no worker has taken it meanwhile (then it is locked, and killed where it runs).
      const removed = await job.remove().then(
        () => true,
        () => false,
      )
      if (removed) {
        const record = killedWhileQueuedRecord(id, job, options.stoppedBy ?? 'operator', options.reason)
        const redis = await this.redis()
        await redis.hset(killedRecordsKey(this.base), { [id]: JSON.stringify(record) })
        await redis.hset(taskQueuesKey(this.base), { [id]: KILLED_WHILE_QUEUED })
        return killedWhileQueuedTask(record)
      }
    }
    if (state === 'completed' || state === 'failed') return describeJob(id, name, job, state)
    const message: ClusterKill = { id, signal: options.signal, graceMs: options.graceMs, reason: options.reason, stoppedBy: options.stoppedBy }
    await (await this.redis()).publish(killChannel(this.base), JSON.stringify(message))
    return this.wait(id, { timeoutMs: (options.graceMs ?? 3000) + 30_000 })
  }

  /**
   * Forgets a finished cluster task everywhere: its spool folder on its worker (through the
   * worker's API), its job and its entry in Redis. A task still queued or running is refused
   * (TEND_ERR_TASK_NOT_FINISHED), as locally.
   */
  async remove(id: string): Promise<{ removed: string; freedBytes: number }> {
    const found = await this.job(id)
    let freedBytes = 0
    if (found) {
      const where = describeJob(id, found.name, found.job, found.state)
      if (found.state !== 'completed' && found.state !== 'failed') throw new TendError('TEND_ERR_TASK_NOT_FINISHED', { id, state: where.state })
      if (where.task && where.worker) {
        try {
          freedBytes = ((await askWorker(await this.redis(), this.base, where.worker, { op: 'remove', id }, REMOVE_ANSWER_MS)) as { freedBytes: number })
            .freedBytes
        } catch (error) {
          // Gone from the worker already (its spool cleaned): the cluster's entries go all the same.
          if (!(error instanceof TendError) || error.code !== 'TEND_ERR_TASK_NOT_FOUND') throw error
        }
      }
      await found.job.remove()
    }
    const redis = await this.redis()
    const owner = found ? describeJob(id, found.name, found.job, found.state).owner : (await this.killedWhileQueued(id).catch(() => null))?.owner
    if (owner !== undefined) await redis.srem(ownerTasksKey(this.base, owner), id)
    await redis.hdel(taskQueuesKey(this.base), id)
    await redis.hdel(killedRecordsKey(this.base), id)
    return { removed: id, freedBytes }
  }

  /** The cluster's tasks (one owner's only, with `owner`), unfinished ones only unless `all`: in the order they were submitted. */
  async list(options: { all?: boolean; owner?: string } = {}): Promise<ClusterTask[]> {
    const redis = await this.redis()
    let where: Array<[string, string | null]>
    if (options.owner === undefined) where = Object.entries(await redis.hgetall(taskQueuesKey(this.base)))
    else {
      const ids = await redis.smembers(ownerTasksKey(this.base, options.owner))
      const names = ids.length > 0 ? await redis.hmget(taskQueuesKey(this.base), ...ids) : []
      where = ids.map((id, index) => [id, names[index] ?? null])
    }
    const found = await Promise.all(
      where.map(async ([id, name]) => {
        if (name === null) return null
        if (name === KILLED_WHILE_QUEUED) {
          const task = await this.killedWhileQueued(id).catch(() => null)
          return task ? { task, at: task.task!.createdAt } : null
        }
        const found = await this.job(id).catch(() => null)
        return found ? { task: describeJob(id, name, found.job, found.state), at: found.job.data.submittedAt } : null
      }),
    )
    return found
      .filter(
        (each): each is { task: ClusterTask; at: string } =>
          each !== null && (options.all === true || !hasEnded(each.task)) && (options.owner === undefined || each.task.owner === options.owner),
      )
      .sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0))
      .map((each) => each.task)
  }

  /** Resolves with the task once it has ended (its final record), or with where it is after timeoutMs. */
  async wait(id: string, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<ClusterTask> {
    const found = await this.job(id)
    if (!found) return this.killedWhileQueued(id)
    const { job, name } = found
    const { events } = await this.queue(name, true)
    const deadline = Date.now() + (options.timeoutMs ?? Infinity)
    for (;;) {
      options.signal?.throwIfAborted()
      // The event stream announces the end at once; a completion that falls between BullMQ's own
      // look and its first read of the stream is missed by it, so the job is looked at again each slice.
      // A job that failed rejects with its reason, a slice that ran out with a time-out: either
      // way the job, looked at next, says where it is (and a Redis that is gone fails that look).
      await job.waitUntilFinished(events!, Math.max(1, Math.min(WAIT_SLICE_MS, deadline - Date.now()))).catch(() => undefined)
      const fresh = await this.job(id)
      if (!fresh) return this.killedWhileQueued(id)
      if (fresh.state === 'completed' || fresh.state === 'failed' || Date.now() >= deadline) return describeJob(id, name, fresh.job, fresh.state)
    }
  }

  /**
   * A client of the worker that holds the task, over its console's TCP API with the token it
   * announced: what stays on that machine (the output) is read there, never copied into Redis.
   */
  async workerClient(id: string): Promise<{ cluster: ClusterTask; client: TendClient }> {
    const cluster = await this.get(id)
    if (!cluster.worker) throw new TendError('TEND_ERR_CLUSTER_QUEUED', { id, what: 'output' })
    return { cluster, client: await this.connectToWorker(cluster.worker, id) }
  }

  /**
   * Writes to the stdin of a task a worker runs. The token a worker publishes only reads, so the
   * bytes go through Redis, to that worker (sealed with the cluster key when there is one), and its
   * answer comes back the same way.
   */
  async input(worker: string, id: string, data: string | Buffer, options: { eof?: boolean } = {}): Promise<TaskInputResult> {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data
    if (bytes.length > INPUT_MAX_BYTES)
      throw new TendError('TEND_ERR_VALIDATION', { detail: `input: at most ${INPUT_MAX_BYTES} bytes per input, got ${bytes.length}` })
    const content = this.keyFile === undefined ? { data: bytes.toString('base64') } : { sealed: seal(bytes, this.clusterKey('input'), `input:${id}`) }
    return (await askWorker(await this.redis(), this.base, worker, { op: 'input', id, eof: options.eof, ...content }, INPUT_ANSWER_MS)) as TaskInputResult
  }

  /** The cluster key, read once; TEND_ERR_CLUSTER_KEY, saying how to make one, when none is configured. */
  private clusterKey(what: string): Buffer {
    if (this.keyFile === undefined)
      throw new TendError('TEND_ERR_CLUSTER_KEY', {
        detail: `${what} on a cluster needs the cluster key, which seals it on its way through Redis, and none is configured: ${CLUSTER_KEY_HOWTO}`,
      })
    this.key ??= readClusterKey(this.keyFile)
    return this.key
  }

  /** A client of a worker's API, kept for this client's life (close() releases it); `id` is the task it is asked about. */
  clientOfWorker(worker: string, id: string): Promise<TendClient> {
    let client = this.workerClients.get(worker)
    if (!client) {
      client = this.connectToWorker(worker, id)
      this.workerClients.set(worker, client)
      // A worker that could not be reached is asked again next time (it may have come back).
      client.catch(() => this.workerClients.delete(worker))
    }
    return client
  }

  private async connectToWorker(worker: string, id: string): Promise<TendClient> {
    const announced = await (await this.redis()).hget(workersKey(this.base), worker)
    if (!announced) throw new TendError('TEND_ERR_CLUSTER_WORKER', { worker, id, detail: 'it is not announced in the cluster' })
    const entry = JSON.parse(announced) as WorkerEntry
    if (!entry.origin || !entry.token)
      throw new TendError('TEND_ERR_CLUSTER_WORKER', {
        worker,
        id,
        detail: 'it announced no console (its log says why): the output of its tasks is read on that machine only',
      })
    return new TendClient({ url: entry.origin, token: entry.token })
  }

  /** A task killed before any worker took it: its final record, kept in Redis when its job went. */
  private async killedWhileQueued(id: string): Promise<ClusterTask> {
    const kept = await (await this.redis()).hget(killedRecordsKey(this.base), id)
    if (!kept) throw new TendError('TEND_ERR_TASK_NOT_FOUND', { id })
    return killedWhileQueuedTask(JSON.parse(kept) as Task)
  }

  /**
   * Resolves when a job on one of these queues has ended (a worker completed or failed it), or
   * after ms, or on abort: a wake-up for whoever then looks at the tasks it follows.
   */
  async whenAnyEnds(queues: string[], ms: number, signal?: AbortSignal): Promise<void> {
    const listening: QueueEvents[] = []
    let ended = false
    let finish!: () => void
    const over = new Promise<void>((resolve) => (finish = resolve))
    const timer = setTimeout(finish, ms)
    signal?.addEventListener('abort', finish, { once: true })
    // The time limit holds from the start, also while the streams connect (Redis may be away).
    void Promise.all(
      [...new Set(queues)].map(async (name) => {
        const { events } = await this.queue(name, true)
        if (ended) return
        listening.push(events!)
        events!.once('completed', finish)
        events!.once('failed', finish)
      }),
    ).catch(() => undefined)
    await over
    ended = true
    clearTimeout(timer)
    signal?.removeEventListener('abort', finish)
    for (const events of listening) {
      events.off('completed', finish)
      events.off('failed', finish)
    }
  }

  async close(): Promise<void> {
    for (const client of this.workerClients.values()) client.then((each) => each.close()).catch(() => undefined)
    this.workerClients.clear()
    for (const { queue, events } of this.queues.values()) {
      await events?.close()
      await queue.close()
    }
    this.queues.clear()
  }

  /** The base queue's Redis connection, for tend's own keys and the kill channel. */
  private async redis(): Promise<RedisCommands> {
    // BullMQ's client type leaves out publish; the connection is ioredis's, which has it.
    return (await (
      await this.queue(this.base)
    ).queue.client) as unknown as RedisCommands
  }

  /**
   * The task's job, queue and state; null for a task killed before any worker took it. The state
   * is read before the job: a job found completed then carries its return value.
   */
  private async job(id: string): Promise<{ job: ClusterJob; name: string; state: string } | null> {
    const name = await (await this.redis()).hget(taskQueuesKey(this.base), id)
    if (!name) throw new TendError('TEND_ERR_TASK_NOT_FOUND', { id })
    if (name === KILLED_WHILE_QUEUED) return null
    const { queue } = await this.queue(name)
    const state = await queue.getJobState(id)
    const job = (await this.bullmq!.Job.fromId(queue, id)) as ClusterJob | undefined
    if (!job) throw new TendError('TEND_ERR_TASK_NOT_FOUND', { id })
    return { job, name, state }
  }

  private async queue(name: string, withEvents = false): Promise<{ queue: Queue; events: QueueEvents | null; eventsReady?: Promise<void> }> {
    this.bullmq ??= await import('bullmq')
    let entry = this.queues.get(name)
    if (!entry) {
      // A submitter gives up on an unreachable Redis (a clear error), unlike a worker, which waits for it.
      const connection = { ...redisConnection(this.redisUrl), maxRetriesPerRequest: 1, connectTimeout: CONNECT_TIMEOUT_MS, retryStrategy: () => null }
      entry = { queue: new this.bullmq.Queue(name, { connection }), events: null }
      this.queues.set(name, entry)
      const queue = entry.queue
      // Each wait listens on the queue until it ends: many waits at once are many listeners, not a leak.
      queue.setMaxListeners(0)
      queue.on('error', () => undefined)
      try {
        await withTimeout(queue.waitUntilReady(), CONNECT_TIMEOUT_MS, () => new Error(`no answer within ${CONNECT_TIMEOUT_MS / 1000} s`))
      } catch (error) {
        this.queues.delete(name)
        await queue.close().catch(() => undefined)
        throw new TendError('TEND_ERR_CLUSTER_UNAVAILABLE', { url: redactRedisUrl(this.redisUrl), detail: (error as Error).message }, { cause: error })
      }
    }
    if (withEvents && !entry.eventsReady) {
      const events = new this.bullmq.QueueEvents(name, { connection: redisConnection(this.redisUrl) })
      events.setMaxListeners(0)
      entry.events = events
      entry.eventsReady = events.waitUntilReady().then(() => undefined)
    }
    // Every waiter waits for the stream to be read: an event before that would be missed.
    if (withEvents) await entry.eventsReady
    return entry
  }
}

/** How long a wait trusts the event stream alone before it looks at the job itself. */
const WAIT_SLICE_MS = 1000

/** How long a worker may take to answer an input (it may wait for the task's stdin to drain) and a removal. */
const INPUT_ANSWER_MS = 30_000
const REMOVE_ANSWER_MS = 10_000

/** How long a submitter waits for Redis to answer before it says it cannot be reached. */
const CONNECT_TIMEOUT_MS = 5000

/** What tend asks of Redis itself, beside BullMQ's own commands. */
interface RedisCommands {
  hset(key: string, fields: Record<string, string>): Promise<number>
  hget(key: string, field: string): Promise<string | null>
  get(key: string): Promise<string | null>
  hgetall(key: string): Promise<Record<string, string>>
  hdel(key: string, field: string): Promise<number>
  publish(channel: string, message: string): Promise<number>
  duplicate: RequestRedis['duplicate']
  sadd(key: string, member: string): Promise<number>
  srem(key: string, member: string): Promise<number>
  smembers(key: string): Promise<string[]>
  hmget(key: string, ...fields: string[]): Promise<Array<string | null>>
}

/** Ended: neither waiting for a worker nor run by one (queued and running are the only states before an end). */
function hasEnded(task: ClusterTask): boolean {
  return task.state !== 'queued' && task.state !== 'running'
}

function killedWhileQueuedTask(record: Task): ClusterTask {
  return {
    id: record.id,
    queue: '',
    owner: record.owner,
    name: record.name,
    command: record.command,
    shell: record.shell,
    state: 'killed',
    worker: null,
    task: record,
    reason: record.reason,
    attempt: 1,
    earlier: [],
  }
}
