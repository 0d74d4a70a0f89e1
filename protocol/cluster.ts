import type { StoppedBy } from './task.js'
import type { Sealed, SealedEnv } from './sealed-env.js'
import type { WireError } from './errors.js'

/**
 * A cluster of tend workers on a shared BullMQ queue (docs/cluster.md): a task that requires
 * labels goes to the queue named after them, and a worker serves the queue of every subset of its
 * labels, so BullMQ itself routes a task to the workers that match it.
 */

/** A worker's labels, or a task's requirements: name=value pairs. */
export type Labels = Record<string, string>

/** The queue every tend cluster uses unless told another. */
export const DEFAULT_CLUSTER_QUEUE = 'tend'

/** A worker serves the queues of every subset of its labels: a few labels, not dozens. */
export const MAX_WORKER_LABELS = 6

const LABEL_PART = /^[A-Za-z0-9_.-]{1,64}$/

/** A label's name or value as parseLabels takes it: letters, digits and ._-, up to 64. */
export function isLabelPart(text: unknown): text is string {
  return typeof text === 'string' && LABEL_PART.test(text)
}
const QUEUE_NAME = /^[A-Za-z0-9_.-]{1,64}$/

/** A worker's name: letters, digits and `_.:@-`, up to 128 (TEND_CLUSTER_NAME's rule, and what tend shows of a worker). */
const WORKER_NAME = /^[A-Za-z0-9_.:@-]{1,128}$/

export function isWorkerName(text: unknown): text is string {
  return typeof text === 'string' && WORKER_NAME.test(text)
}

/** `k=v,k2=v2` as labels; throws an Error naming what is wrong (the caller says where it came from). */
export function parseLabels(text: string): Labels {
  const labels: Labels = {}
  for (const pair of text.split(',').filter((each) => each !== '')) {
    const match = /^([^=]*)=(.*)$/.exec(pair)
    if (!match || !LABEL_PART.test(match[1]!) || !LABEL_PART.test(match[2]!)) {
      throw new Error(`expected name=value pairs separated by commas (letters, digits and ._- in each, up to 64), got ${JSON.stringify(pair)}`)
    }
    if (match[1]! in labels) throw new Error(`label ${match[1]} is given twice`)
    labels[match[1]!] = match[2]!
  }
  return labels
}

export function checkQueueName(name: string): string {
  if (!QUEUE_NAME.test(name)) throw new Error(`expected a queue name of letters, digits and ._- (up to 64), got ${JSON.stringify(name)}`)
  return name
}

/** Labels as they are shown: `k=v` pairs by sorted name, joined by commas (`''` for none). */
export function formatLabels(labels: Labels): string {
  return Object.keys(labels)
    .sort()
    .map((key) => `${key}=${labels[key]}`)
    .join(',')
}

/** The queue a task with these requirements is put on: the base name, then each requirement, sorted. */
export function queueFor(base: string, requirements: Labels): string {
  return [
    base,
    ...Object.keys(requirements)
      .sort()
      .map((key) => `${key}=${requirements[key]}`),
  ].join('~')
}

/** Every queue a worker with these labels serves: one per subset of its labels, the base queue first. */
export function queuesServed(base: string, labels: Labels): string[] {
  const keys = Object.keys(labels).sort()
  if (keys.length > MAX_WORKER_LABELS) throw new Error(`a worker takes at most ${MAX_WORKER_LABELS} labels, got ${keys.length}`)
  const queues: string[] = []
  for (let mask = 0; mask < 1 << keys.length; mask++) {
    const subset: Labels = {}
    keys.forEach((key, index) => {
      if (mask & (1 << index)) subset[key] = labels[key]!
    })
    queues.push(queueFor(base, subset))
  }
  return queues
}

/** The labels a queue's tasks require, from its name (queueFor's inverse); null for another base's queue. */
export function requirementsOf(base: string, queue: string): Labels | null {
  const [head, ...parts] = queue.split('~')
  if (head !== base) return null
  const requirements: Labels = {}
  for (const part of parts) {
    const at = part.indexOf('=')
    if (at <= 0) return null
    requirements[part.slice(0, at)] = part.slice(at + 1)
  }
  return requirements
}

/** Whether a worker with these labels takes the tasks of this queue: it has every label the queue requires. */
export function serves(labels: Labels, requirements: Labels): boolean {
  return Object.entries(requirements).every(([key, value]) => labels[key] === value)
}

/** The Redis set of every queue a task was ever put on (a worker looks after those no live worker serves). */
export function queuesKey(base: string): string {
  return `tend:${base}:queues`
}

/** A worker's heartbeat key: it exists while the worker is alive (set again before it expires). */
export function aliveKey(base: string, worker: string): string {
  return `tend:${base}:alive:${worker}`
}

/** The Redis set of one owner's cluster tasks (ids): an agent's list reads only its own. */
export function ownerTasksKey(base: string, owner: string): string {
  return `tend:${base}:owner:${owner}`
}

/** The Redis hash that says which queue holds each cluster task (any client finds a task by its id). */
export function taskQueuesKey(base: string): string {
  return `tend:${base}:task-queues`
}

/** What a job carries: the task's start request (as POST /v1/tasks takes it) and the labels it requires. */
export interface ClusterJobData {
  request: Record<string, unknown>
  requirements: Labels
  /** When it was submitted, ISO. */
  submittedAt: string
  /** How many times a task lost with its worker runs again elsewhere (absent: 0). */
  retries?: number
  /**
   * The request's environment values, sealed with the cluster key (the request itself carries
   * none): removed from the job once a worker has taken it for its last possible attempt.
   */
  sealedEnv?: SealedEnv
}

/** The most retries a cluster task may ask for. */
export const MAX_CLUSTER_RETRIES = 10

/** What a worker reports on a job while the task runs (BullMQ progress). */
export interface ClusterProgress {
  worker: string
  state: string
  pid: number | null
  /** Which run of the task this is: 1, then one more per retry (absent: 1). */
  attempt?: number
  /** How the earlier attempts ended, oldest first. */
  earlier?: ClusterAttempt[]
}

/** An attempt of a cluster task that was lost with its worker. */
export interface ClusterAttempt {
  attempt: number
  worker: string
  /** Why it counts as lost. */
  reason: string
}

/** What ioredis (under BullMQ) is given to reach Redis. */
export interface RedisConnection {
  host: string
  port: number
  username?: string
  password?: string
  db: number
  tls?: Record<string, never>
  /** null: a command waits for Redis to come back however long (what BullMQ requires of a worker). */
  maxRetriesPerRequest: number | null
  enableOfflineQueue?: boolean
}

/** Whether a Redis URL carries a password (or a user's credentials): such a URL is never put in an argv. */
export function redisUrlHasPassword(url: string): boolean {
  try {
    const parsed = new URL(url)
    // tend reads no option from the query, but other clients take ?password=: any query counts.
    return parsed.password !== '' || parsed.username !== '' || parsed.search !== ''
  } catch {
    // Not a URL: whatever it holds, it is not shown back.
    return /@/.test(url)
  }
}

/** The URL as it may be shown (in a message, a log): its password replaced. */
export function redactRedisUrl(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password !== '') parsed.password = '***'
    if (parsed.search !== '') parsed.search = '?***'
    return parsed.toString()
  } catch {
    return '(a URL that cannot be parsed)'
  }
}

/** Connection options from a redis:// or rediss:// URL (user, password, database as /N). */
export function redisConnection(url: string): RedisConnection {
  const parsed = new URL(url)
  const db = parsed.pathname.length > 1 ? Number(parsed.pathname.slice(1)) : 0
  return {
    host: parsed.hostname.replace(/^\[|\]$/g, ''),
    port: parsed.port ? Number(parsed.port) : 6379,
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    db: Number.isInteger(db) ? db : 0,
    ...(parsed.protocol === 'rediss:' ? { tls: {} } : {}),
    maxRetriesPerRequest: null,
  }
}

/** The Redis channel a kill of a cluster task is published on; the worker that holds the task acts on it. */
export function killChannel(base: string): string {
  return `tend:${base}:kill`
}

/**
 * The Redis channel of the other changes a cluster's clients ask of the worker that holds a task
 * (stdin, removal): the token a worker publishes only reads, so they come this way, as kills do.
 */
export function requestChannel(base: string): string {
  return `tend:${base}:requests`
}

/** A change asked of the worker that holds a task; its answer is published on `replyTo`. */
export type ClusterRequest =
  | { op: 'input'; id: string; worker: string; replyTo: string; eof?: boolean; data?: string; sealed?: Sealed }
  | { op: 'remove'; id: string; worker: string; replyTo: string }

/** A worker's answer to a ClusterRequest: what the socket's route would answer, or its error. */
export type ClusterReply = { ok: true; result: unknown } | { ok: false; error: WireError }

/** A kill, as published. */
export interface ClusterKill {
  id: string
  signal?: string | number
  graceMs?: number
  reason?: string
  /** Who asks: the task's agent (`owner`), its session's end, or (the default) the operator. */
  stoppedBy?: RequestedStop
}

/** Who can ask for a kill, as a task's stoppedBy records it. */
export const REQUESTED_STOPS = ['owner', 'operator', 'session-end'] as const satisfies readonly StoppedBy[]
export type RequestedStop = (typeof REQUESTED_STOPS)[number]

/** What the task-queues hash holds for a task killed before any worker took it. */
export const KILLED_WHILE_QUEUED = '!killed'

/** The Redis hash of the final records of tasks killed before any worker took them: id → Task (JSON). */
export function killedRecordsKey(base: string): string {
  return `tend:${base}:killed`
}

/** The Redis hash of the cluster's workers: name → WorkerEntry (JSON). */
export function workersKey(base: string): string {
  return `tend:${base}:workers`
}

/**
 * How a worker is reached for what stays on it (a task's output): its console's TCP API and a
 * token of the read scope: whoever can read the cluster's Redis can read records and output with
 * it, and change nothing (docs/console.md, token scopes).
 */
export interface WorkerEntry {
  name: string
  /** null: the worker's console could not listen; its tasks' output is read on its machine only. */
  origin: string | null
  token: string | null
  labels: Labels
  startedAt: string
}

/** A job that failed with a reason that starts so is a task that was lost with its worker. */
export const LOST_PREFIX = 'lost: '
