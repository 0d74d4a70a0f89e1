import { rename } from 'node:fs/promises'
import { join } from 'node:path'
import { withTimeout } from '../../protocol/index.js'
import { openRegularFileForWrite } from '../../spool/index.js'

/**
 * A task's lease: the file `lease` in its spool folder holds until when, in CLOCK_MONOTONIC
 * milliseconds, its keeper lets it run (daemon/spawner/lifeline.c reads it every 50 ms). The
 * daemon writes it as long as it may run the task (while whoever granted it the task's fence
 * confirms it); a daemon that is frozen or cut off stops writing it, and the keeper ends the task
 * when it runs out, on its own, whatever the daemon does. Only tasks that end with their daemon
 * (endsWithDaemon) have a keeper that reads it.
 */
export const LEASE_FILE = 'lease'

/** CLOCK_MONOTONIC now, in milliseconds: the clock the keeper reads a lease against (libuv's hrtime is CLOCK_MONOTONIC). */
export function monotonicNowMs(): number {
  return Number(process.hrtime.bigint() / 1_000_000n)
}

/**
 * Sets the lease of the task whose spool folder this is to `ms` from now; atomic (a temporary file
 * renamed over it). The temporary file's name can be guessed by a task under `off`: a link or FIFO
 * planted there is refused, never written through or waited on, and a hard link there is unlinked,
 * never emptied and written.
 */
export async function writeLease(taskFolder: string, ms: number): Promise<void> {
  const path = join(taskFolder, LEASE_FILE)
  const temporary = `${path}.${process.pid}.tmp`
  const handle = await openRegularFileForWrite(temporary, { fresh: true })
  try {
    await handle.writeFile(`${Math.floor(monotonicNowMs() + ms)}\n`)
  } finally {
    await handle.close()
  }
  await rename(temporary, path)
}

/** What the one who grants a fence answers when asked: held for `remainingMs` more, or not held (why). */
export type FenceAnswer = { held: true; remainingMs: number } | { held: false; why: string }

export interface FenceOptions {
  /** Asks whether the fence is still held, and for how long; throws (or never answers) when it cannot be asked. */
  confirm: () => Promise<FenceAnswer>
  /** How long a fence lives unrenewed, in ms. */
  ttlMs: number
  /** Why the fence counts as lost when nothing confirmed it for `silentMs`. */
  unconfirmedWhy: (silentMs: number) => string
  /** The fence is about to be lost, or is: the task must stop now. Called once. */
  onLost: (why: string) => void
  /**
   * The fence was confirmed: the task may run until `until` (wall-clock ms), its expiry less half
   * the margin (this watch stops it at the whole margin: the keeper acts only when it cannot).
   */
  onConfirmed?: (until: number) => void
}

/** The share of a fence's life between two looks at it, and kept as a margin before its expiry. */
export const FENCE_SLICE = 1 / 10

/**
 * Watches a fence a task runs under (one that, once expired, lets another run the task again), so
 * that the task here has stopped by then. Every tenth of the fence's life it asks whether the fence
 * is still held and until when; a tenth of its life before the expiry last confirmed (no answer
 * since), or as soon as the answer is that it is not held, it calls onLost. The decision is made on
 * what the grantor said, never on a hope that renewals went through. Each confirmation is also
 * handed to onConfirmed, for the task's keeper (writeLease), which ends the task by itself should
 * this daemon stop confirming (frozen: then this watch cannot run either). Answers a stop.
 */
export function watchFence(options: FenceOptions): () => void {
  const { ttlMs } = options
  const margin = ttlMs * FENCE_SLICE
  let lost = false
  let looking = false
  let lastConfirmedAt = Date.now()
  let deadline: NodeJS.Timeout | undefined
  const lose = (why: string) => {
    if (lost) return
    lost = true
    clearInterval(timer)
    clearTimeout(deadline)
    options.onLost(why)
  }
  // Stops the task a margin before the fence's expiry as last confirmed, unless a newer answer comes first.
  const expiresAt = (at: number) => {
    clearTimeout(deadline)
    deadline = setTimeout(() => lose(options.unconfirmedWhy(Date.now() - lastConfirmedAt)), Math.max(0, at - margin - Date.now()))
    deadline.unref()
  }
  const look = async () => {
    if (looking || lost) return
    looking = true
    const askedAt = Date.now()
    try {
      const answer = await withTimeout(options.confirm(), ttlMs * FENCE_SLICE, () => new Error(`no answer within ${ttlMs * FENCE_SLICE} ms`))
      if (!answer.held) return lose(answer.why)
      if (answer.remainingMs > 0 && !lost) {
        lastConfirmedAt = askedAt
        expiresAt(askedAt + answer.remainingMs)
        options.onConfirmed?.(askedAt + answer.remainingMs - margin / 2)
      }
    } catch {
      // No answer: the fence is as last known, and the deadline stands.
    } finally {
      looking = false
    }
  }
  // The fence was granted a moment ago: half its life is a safe first bound (the task's first lease too).
  expiresAt(Date.now() + ttlMs / 2 + margin)
  const timer = setInterval(() => void look(), ttlMs * FENCE_SLICE)
  timer.unref()
  void look()
  return () => {
    lost = true
    clearInterval(timer)
    clearTimeout(deadline)
  }
}
