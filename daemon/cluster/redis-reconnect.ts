import type { Logger } from 'pino'
import { backoffMs } from '../../protocol/index.js'
import type { RedisChange } from './worker-notices.js'

/** The first repeat of an outage's log line comes this long after its first line. */
const FIRST_REPEAT_MS = 10_000

/** The interval between repeats doubles up to this: an outage of a day is a few hundred lines, not tens of thousands. */
const MAX_REPEAT_MS = 5 * 60_000

/**
 * When an outage of Redis is logged: at its first failure, then at an interval that starts at
 * FIRST_REPEAT_MS and doubles up to MAX_REPEAT_MS, whatever the number of failures between
 * (every connection of a worker retries on its own, each within seconds). Times are given, so
 * that the policy is a pure function of them.
 */
export interface OutageSchedule {
  /** A failure at `now`: answers whether it is to be logged. */
  failed: (now: number) => boolean
  /** Redis answered: the next failure starts a new outage. */
  reached: () => void
}

export function outageSchedule(): OutageSchedule {
  let nextAt: number | null = null
  let repeats = 0
  return {
    failed: (now) => {
      if (nextAt !== null && now < nextAt) return false
      if (nextAt !== null) repeats += 1
      nextAt = now + backoffMs(repeats, FIRST_REPEAT_MS, MAX_REPEAT_MS)
      return true
    },
    reached: () => {
      nextAt = null
      repeats = 0
    },
  }
}

/** How many lines the schedule gives an outage that lasts `ms` at most (failures all along). */
export function outageLinesAllowed(ms: number): number {
  let lines = 1
  let at = 0
  while (at + backoffMs(lines - 1, FIRST_REPEAT_MS, MAX_REPEAT_MS) <= ms) {
    at += backoffMs(lines - 1, FIRST_REPEAT_MS, MAX_REPEAT_MS)
    lines += 1
  }
  return lines
}

/** How long a connection may stay connected without Redis answering before the outage is said (a port that accepts and never answers). */
const ANSWER_WAIT_MS = 5000

/** Between two attempts to reach Redis, at most this: a worker rejoins within seconds of Redis coming back. */
const MAX_RETRY_DELAY_MS = 5000

/** ioredis's retryStrategy for every connection of a worker: soon at first, then every MAX_RETRY_DELAY_MS, forever. */
export function retryDelay(attempt: number): number {
  return Math.min(attempt * 200, MAX_RETRY_DELAY_MS)
}

/** What the outage log watches: an ioredis client (its connection events). */
interface WatchedClient {
  status: string
  on(event: 'error', listener: (error: Error) => void): unknown
  on(event: 'ready' | 'connect' | 'close', listener: () => void): unknown
}

/** Errors of a connection to Redis (refused, reset, timed out, closed), not of a command or a job. */
export function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false
  const { code, syscall } = error as NodeJS.ErrnoException
  return syscall !== undefined || code === 'ETIMEDOUT' || /^Connection is closed/.test(error.message)
}

export interface RedisOutageOptions {
  /** The URL as it may be shown (redactRedisUrl). */
  shownUrl: string
  log: Logger
  /**
   * Where the operator of a foreground worker reads: the first connection, then each change (Redis
   * lost, Redis back); or, if Redis cannot be reached from the start, that, once.
   */
  notice: (change: RedisChange) => void
  now?: () => number
}

/**
 * One log of a worker's Redis outages, shared by all its connections: each retries on its own,
 * every second or two, and an outage logged per failed attempt buries the log (322 lines in ten
 * minutes). The first failure is logged with the URL (never its password), then the outage at a
 * slowing interval with the count of failed attempts since; the return of Redis is logged once.
 * A worker that could not reach Redis from its start also says so once where its operator reads.
 */
export class RedisOutage {
  private readonly schedule = outageSchedule()
  private readonly now: () => number
  private failures = 0
  private since: number | null = null
  private everReached = false
  private noticed = false
  private closed = false
  private readonly timers = new Set<NodeJS.Timeout>()

  constructor(private readonly options: RedisOutageOptions) {
    this.now = options.now ?? Date.now
  }

  /** Routes a client's connection errors and answers here; a connection that connects but gets no answer counts as a failure. */
  watch(client: WatchedClient): void {
    let silent: NodeJS.Timeout | undefined
    const clear = () => {
      if (silent) this.timers.delete(silent)
      clearTimeout(silent)
      silent = undefined
    }
    client.on('error', (error) => this.failed(error))
    client.on('ready', () => {
      clear()
      this.reached()
    })
    client.on('connect', () => {
      clear()
      silent = setTimeout(() => {
        clear()
        if (client.status !== 'ready')
          this.failed(Object.assign(new Error(`connected, but no answer within ${ANSWER_WAIT_MS / 1000} s`), { code: 'ENOANSWER' }))
      }, ANSWER_WAIT_MS)
      silent.unref()
      this.timers.add(silent)
    })
    client.on('close', clear)
  }

  failed(error: Error): void {
    // A worker that is leaving cuts its connections: what fails then is no outage.
    if (this.closed) return
    const now = this.now()
    const code = (error as NodeJS.ErrnoException).code ?? error.message
    this.failures += 1
    // An outage starts: said once (however many connections fail), if Redis had answered before.
    if (this.since === null && this.everReached) this.options.notice({ event: 'lost', code, error: error.message })
    this.since ??= now
    if (!this.schedule.failed(now)) return
    const first = this.failures === 1
    const what = first
      ? 'cluster Redis unreachable: local tasks are served; the worker joins the cluster when Redis answers'
      : 'cluster Redis still unreachable'
    this.options.log.warn({ redis: this.options.shownUrl, code, error: error.message, failedAttempts: this.failures, downForMs: now - this.since }, what)
    if (!this.everReached && !this.noticed) {
      this.noticed = true
      this.options.notice({ event: 'unreachable', code, error: error.message })
    }
  }

  private reached(): void {
    if (this.closed) return
    if (!this.everReached) this.options.notice({ event: 'connected' })
    else if (this.since !== null) this.options.notice({ event: 'back' })
    this.everReached = true
    if (this.since !== null)
      this.options.log.info(
        { redis: this.options.shownUrl, downForMs: this.now() - this.since, failedAttempts: this.failures },
        'cluster Redis reachable again',
      )
    this.since = null
    this.failures = 0
    this.schedule.reached()
  }

  close(): void {
    this.closed = true
    for (const timer of this.timers) clearTimeout(timer)
    this.timers.clear()
  }
}

/**
 * Waits for `graceful` at most `boundMs`; past that, `force` runs (it cuts the connections, which
 * fails every command waiting on them) and the wait ends: a stop never waits on Redis for longer.
 */
export async function withinBound(graceful: Promise<unknown>, boundMs: number, force: () => void): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<'expired'>((resolve) => (timer = setTimeout(() => resolve('expired'), boundMs)))
  const settled = graceful.then(
    () => 'done' as const,
    () => 'done' as const,
  )
  const outcome = await Promise.race([settled, expired])
  clearTimeout(timer)
  if (outcome === 'expired') force()
}
