import { randomBytes } from 'node:crypto'
import { setTimeout as delay } from 'node:timers/promises'
import {
  eventTypeForState,
  isFinished,
  TendError,
  WAIT_MS_LIMIT,
  type ReadResult,
  type Task,
  type TaskEvent,
  type TaskInputResult,
} from '../../protocol/index.js'
import type { KillOptions, ListOptions, ReadOptions, StartOptions } from '../client.js'
import type { ClusterClient, ClusterTask } from './cluster-client.js'
import type { EventsOptions } from '../events.js'
import type { TaskService } from '../task-service.js'

/** How long the ending of a task is left to the queue's events alone before its job is looked at. */
const SWEEP_MS = 1000

/** How often a read that waits for a queued task to be taken looks again. */
const TAKEN_POLL_MS = 100

/**
 * One owner's tasks on a cluster, answered as the local daemon answers them (TaskService), so that
 * the agent tools and `tend mcp` work unchanged: records come from the worker that holds the task
 * (or from the queue before one does), output and stdin go to that worker over its API, kills go
 * through the cluster's kill channel. Endings are events of this stream: each of the owner's tasks
 * is followed until its job has ended, woken by the queue's events and looked at every second
 * besides, so an ending is announced even when Redis was away when it happened.
 */
export class ClusterTasks implements TaskService {
  /** The owner's tasks not yet seen ended, by id: the queue each is on. */
  private readonly following = new Map<string, string>()
  private followingPrimed = false
  private seq = 0
  /** Names this stream: a new ClusterTasks is a new stream, read from its start. */
  private readonly streamId = `cluster-${randomBytes(6).toString('hex')}`
  private wake: (() => void) | undefined

  constructor(
    readonly cluster: ClusterClient,
    readonly owner: string,
  ) {}

  async start(options: StartOptions): Promise<Task> {
    if (options.after)
      throw new TendError('TEND_ERR_VALIDATION', { detail: "after: a cluster's tasks cannot wait for others (a task on the local daemon can)" })
    const started = await this.cluster.start({ ...options, owner: this.owner })
    this.follow(started)
    return this.get(started.id)
  }

  async get(id: string): Promise<Task> {
    return (await this.visible(id)).task
  }

  /** The owner's tasks, unfinished ones unless `all`, in the order they were submitted. */
  async list(options: ListOptions = {}): Promise<Task[]> {
    const mine = await this.cluster.list({ all: options.all, owner: this.owner })
    return Promise.all(mine.map(async (each) => each.task ?? (await this.cluster.record(each.id)).task))
  }

  async read(id: string, options: ReadOptions = {}): Promise<ReadResult> {
    let { cluster, task } = await this.visible(id)
    // A long poll on a task no worker has taken yet waits for one to take it first.
    const deadline = Date.now() + Math.min(options.waitMs ?? 0, WAIT_MS_LIMIT)
    while (!cluster.worker && task.state === 'queued' && Date.now() < deadline) {
      await delay(Math.min(TAKEN_POLL_MS, deadline - Date.now()), undefined, { signal: options.signal })
      ;({ cluster, task } = await this.visible(id))
    }
    if (cluster.worker) {
      const worker = await this.cluster.clientOfWorker(cluster.worker, id).catch((error: unknown) => (isFinished(task) ? null : Promise.reject(error)))
      // A finished task on a worker that is gone (it was lost with it) reads as what is known: its end.
      if (worker) {
        const waitMs = Math.max(0, deadline - Date.now())
        return worker
          .read(id, { ...options, ...(options.waitMs === undefined ? {} : { waitMs }) })
          .catch((error: unknown) => (isFinished(task) ? endOf(task, options) : Promise.reject(error)))
      }
    }
    return endOf(task, options)
  }

  async wait(id: string, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Task> {
    await this.visible(id)
    await this.cluster.wait(id, options)
    return this.get(id)
  }

  /** The worker that holds the task waits for its readiness; one not taken yet is waited for first, as a read does. */
  async waitReady(id: string, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Task> {
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs
    let { cluster, task } = await this.visible(id)
    while (!cluster.worker && task.state === 'queued' && Date.now() < deadline) {
      await delay(Math.min(TAKEN_POLL_MS, deadline - Date.now()), undefined, { signal: options.signal })
      ;({ cluster, task } = await this.visible(id))
    }
    if (!cluster.worker || isFinished(task)) return task
    const worker = await this.cluster.clientOfWorker(cluster.worker, id)
    const timeoutMs = deadline === Infinity ? undefined : Math.max(0, deadline - Date.now())
    return worker.waitReady(id, { timeoutMs, signal: options.signal })
  }

  async kill(id: string, options: KillOptions = {}): Promise<Task> {
    await this.visible(id)
    await this.cluster.kill(id, { signal: options.signal, graceMs: options.graceMs, reason: options.reason, stoppedBy: options.stoppedBy ?? 'owner' })
    return this.get(id)
  }

  async input(id: string, data: string | Buffer, options: { eof?: boolean } = {}): Promise<TaskInputResult> {
    const { cluster, task } = await this.visible(id)
    if (!cluster.worker) {
      if (isFinished(task)) throw new TendError('TEND_ERR_NO_STDIN', { id, stdin: 'gone: the task has ended' })
      throw new TendError('TEND_ERR_CLUSTER_QUEUED', { id, what: 'stdin' })
    }
    return this.cluster.input(cluster.worker, id, data, options)
  }

  async status(): Promise<{ events: { daemonId: string; lastSeq: number } }> {
    return { events: { daemonId: this.streamId, lastSeq: this.seq } }
  }

  /**
   * The endings of the owner's tasks, each once: of those it started, and of those that ran when
   * the stream was first read (a session that comes back). Never throws for a Redis that is away:
   * it looks again until Redis answers, then announces what ended meanwhile.
   */
  async *events(options: EventsOptions = {}): AsyncGenerator<TaskEvent> {
    const { signal } = options
    while (!signal?.aborted) {
      let ended: Task[] = []
      try {
        await this.primeFollowing()
        ended = await this.endedSinceLastLook()
      } catch {
        // Redis (or a worker) is away: the tasks are looked at again on the next round.
      }
      for (const task of ended) {
        this.following.delete(task.id)
        this.seq += 1
        yield {
          seq: this.seq,
          daemonId: this.streamId,
          type: eventTypeForState(task.state),
          at: task.endedAt ?? new Date().toISOString(),
          taskId: task.id,
          owner: task.owner,
          task,
        }
      }
      if (signal?.aborted) return
      const woken = new AbortController()
      this.wake = () => woken.abort()
      const stop = signal ? AbortSignal.any([signal, woken.signal]) : woken.signal
      await this.cluster
        .whenAnyEnds([...this.following.values()], SWEEP_MS, stop)
        .catch(() => delay(SWEEP_MS, undefined, { signal: stop }).catch(() => undefined))
      this.wake = undefined
    }
  }

  close(): void {
    void this.cluster.close()
  }

  /** The task, answered only to its owner (another owner's is not found, as on a daemon). */
  private async visible(id: string): Promise<{ cluster: ClusterTask; task: Task }> {
    const found = await this.cluster.record(id)
    if (found.task.owner !== this.owner) throw new TendError('TEND_ERR_TASK_NOT_FOUND', { id })
    return found
  }

  private follow(task: Pick<ClusterTask, 'id' | 'queue'>): void {
    this.following.set(task.id, task.queue)
    this.wake?.()
  }

  /** The owner's tasks that ran or waited before this stream was first read are followed too. */
  private async primeFollowing(): Promise<void> {
    if (this.followingPrimed) return
    for (const each of await this.cluster.list({ owner: this.owner })) this.follow(each)
    this.followingPrimed = true
  }

  private async endedSinceLastLook(): Promise<Task[]> {
    const looked = await Promise.all(
      [...this.following.keys()].map(async (id) => {
        const where = await this.cluster
          .get(id)
          .catch((error: unknown) => (error instanceof TendError && error.code === 'TEND_ERR_TASK_NOT_FOUND' ? null : Promise.reject(error)))
        // Removed meanwhile (tend rm): nothing is left to announce.
        if (where === null) this.following.delete(id)
        if (where === null || where.state === 'queued' || where.state === 'running') return null
        // Lost with its worker, or refused by it: the record is the queue's.
        return where.task ?? (await this.cluster.record(id)).task
      }),
    )
    return looked.filter((task): task is Task => task !== null && isFinished(task))
  }
}

/** A read past what a worker can give: the task's end (or, queued, nothing yet), at the cursor asked for. */
function endOf(task: Task, options: ReadOptions): ReadResult {
  const at = Math.min(options.from ?? 0, task.outputBytes)
  const done = isFinished(task)
  return { data: '', encoding: options.encoding ?? 'utf8', from: at, next: at, done, truncated: false, outputBytes: task.outputBytes, state: task.state }
}
