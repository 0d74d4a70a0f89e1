import type { Queue } from 'bullmq'
import {
  aliveKey,
  formatLabels,
  isLabelPart,
  isWorkerName,
  queuesServed,
  serves,
  workersKey,
  type ClusterProgress,
  type Labels,
  type WorkerEntry,
} from '../../protocol/index.js'

/** A live worker of a cluster, as `tend workers` lists it. Its console's token is never listed: it reads every record and output of the worker. */
export interface LiveWorker {
  name: string
  labels: Labels
  /** The queues it serves: one per subset of its labels. */
  queues: string[]
  /** Its cluster tasks running now (its active jobs). */
  running: number
  runningIds: string[]
  /** Tasks waiting on the queues it serves (another worker may take them). */
  queued: number
  /** When it last renewed its heartbeat, ISO. */
  lastHeartbeat: string
  /** When it joined, ISO. */
  startedAt: string
}

/** What finding the live workers reads of Redis. */
export interface AnnouncedSource {
  base: string
  redis: { hgetall(key: string): Promise<Record<string, string>>; get(key: string): Promise<string | null> }
}

/** What listing them with their tasks reads besides: the queues they serve. */
export interface WorkersSource extends AnnouncedSource {
  queue: (name: string) => Promise<Queue>
}

/** A worker's entry and its heartbeat (when it was last set, ISO). */
interface LiveEntry {
  entry: WorkerEntry
  beat: string
}

/**
 * The announced workers whose heartbeat key exists (an entry stays in the hash after its worker
 * left). An entry that is not a worker's (any writer of Redis may have put it there) is left out.
 */
export async function liveEntries(source: AnnouncedSource): Promise<LiveEntry[]> {
  const announced = Object.entries(await source.redis.hgetall(workersKey(source.base))).flatMap(([field, text]) => {
    const entry = parseEntry(field, text)
    return entry ? [entry] : []
  })
  const alive = await Promise.all(announced.map(async (entry) => ({ entry, beat: await source.redis.get(aliveKey(source.base, entry.name)) })))
  // A heartbeat is the time it was set: anything else is no worker's.
  return alive.filter((each): each is LiveEntry => isTime(each.beat))
}

/** A time as a worker writes one (toISOString), no later than a minute from now (clocks differ a little, not by years). */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

function isTime(value: unknown): value is string {
  return typeof value === 'string' && ISO_TIME.test(value) && Date.parse(value) <= Date.now() + 60_000
}

/**
 * A worker's entry as a worker writes it, or null: any writer of Redis may have put anything in
 * the hash, and what is kept is shown to operators (tend workers, the --require warning). It must
 * sit under its own name (a worker writes it there; another field would borrow that worker's
 * heartbeat), its name a worker's name, its labels labels a worker takes (parseLabels' rule, at
 * most MAX_WORKER_LABELS), its start a time.
 */
function parseEntry(field: string, text: string): WorkerEntry | null {
  try {
    const entry = JSON.parse(text) as Partial<WorkerEntry> | null
    if (entry === null || !isWorkerName(entry.name) || entry.name !== field || !isTime(entry.startedAt)) return null
    if (typeof entry.labels !== 'object' || entry.labels === null || Array.isArray(entry.labels)) return null
    if (!Object.entries(entry.labels).every(([key, value]) => isLabelPart(key) && isLabelPart(value))) return null
    // More labels than a worker takes make it no worker's entry: this throws.
    queuesServed('', entry.labels)
    return entry as WorkerEntry
  } catch {
    return null
  }
}

/** How many active jobs of each queue are read to count the workers' running tasks: bounded, as a queue's active jobs are its workers' concurrency in all. */
const ACTIVE_READ_MAX = 10_000

/**
 * The live workers, each with its running tasks (the active jobs whose progress names it) and the waiting jobs of its queues.
 */
export async function liveWorkers(source: WorkersSource): Promise<LiveWorker[]> {
  const live = await liveEntries(source)
  const queueNames = [...new Set(live.flatMap(({ entry }) => queuesServed(source.base, entry.labels)))]
  const perQueue = new Map(
    await Promise.all(
      queueNames.map(async (name) => {
        const queue = await source.queue(name)
        const [waiting, active] = await Promise.all([queue.getWaitingCount(), queue.getJobs(['active'], 0, ACTIVE_READ_MAX - 1)])
        const runners = active.flatMap((job) => {
          const progress = job?.progress as Partial<ClusterProgress> | undefined
          return job?.id && typeof progress === 'object' && typeof progress.worker === 'string' ? [{ id: job.id, worker: progress.worker }] : []
        })
        return [name, { waiting, runners }] as const
      }),
    ),
  )
  return live
    .map(({ entry, beat }) => {
      const queues = queuesServed(source.base, entry.labels)
      const runningIds = queues.flatMap((name) =>
        perQueue
          .get(name)!
          .runners.filter((each) => each.worker === entry.name)
          .map((each) => each.id),
      )
      return {
        name: entry.name,
        labels: entry.labels,
        queues,
        running: runningIds.length,
        runningIds,
        queued: queues.reduce((sum, name) => sum + perQueue.get(name)!.waiting, 0),
        // An older worker's heartbeat holds when it started, not when it beat.
        lastHeartbeat: beat,
        startedAt: entry.startedAt,
      }
    })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
}

/**
 * The warning for requirements no live worker meets (the task waits, queued, until one joins),
 * naming the labels on offer; null when one meets them.
 */
export function unmetRequirementsWarning(requirements: Labels, workers: Array<Pick<LiveWorker, 'name' | 'labels'>>): string | null {
  if (Object.keys(requirements).length === 0 || workers.some((worker) => serves(worker.labels, requirements))) return null
  const wanted = formatLabels(requirements)
  const offer =
    workers.length === 0
      ? 'no worker is live'
      : `labels on offer: ${workers.map((worker) => `${worker.name}: ${formatLabels(worker.labels) || 'no labels'}`).join('; ')}`
  return `no live worker has ${wanted}; the task waits, queued, until one joins (${offer})`
}
