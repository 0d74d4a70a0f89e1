import { cpus, totalmem } from 'node:os'
import type { KeeperUsage } from '../../spawn/spawner.js'

/**
 * The most a run can have used, as the kernel allows it: a task under `off` has the daemon's uid
 * and can replace its own exit file, so the keeper's figures are taken only within these (a task
 * can still shape its figures inside them: docs/sandbox.md). CPU time: the run's wall time on every
 * online CPU; peak memory: the machine's physical memory; bytes read or written: the wall time at a
 * rate no storage reaches. Each with a second of slack for the clocks' edges (the keeper's children
 * start a moment before the daemon records the start).
 */
export interface UsageBounds {
  cpuMs: number
  peakMemoryBytes: number
  ioBytes: number
}

/** Slack on the wall time, in milliseconds. */
const SLACK_MS = 1000
/** Bytes a task could move to or from storage in a millisecond, at most: 128 MiB (~134 GB/s). */
const MAX_IO_BYTES_PER_MS = 128 * 1024 * 1024

/** The bounds of a run from `startedAt` (the daemon's record; null: unknown, taken as `endedAtMs`) to `endedAtMs`. */
export function usageBounds(startedAt: string | null, endedAtMs: number): UsageBounds {
  const startedAtMs = startedAt === null ? Number.NaN : Date.parse(startedAt)
  const wallMs = Math.max(0, Number.isNaN(startedAtMs) ? 0 : endedAtMs - startedAtMs) + SLACK_MS
  return { cpuMs: wallMs * Math.max(1, cpus().length), peakMemoryBytes: totalmem(), ioBytes: wallMs * MAX_IO_BYTES_PER_MS }
}

/** The first figure past its bound, with its value; null when every one is within. */
export function figurePastBounds(counted: KeeperUsage, bounds: UsageBounds): { figure: keyof KeeperUsage; value: number } | null {
  const limits: Array<[keyof KeeperUsage, number]> = [
    ['cpuUserMs', bounds.cpuMs],
    ['cpuSystemMs', bounds.cpuMs],
    ['peakMemoryBytes', bounds.peakMemoryBytes],
    ['readBytes', bounds.ioBytes],
    ['writeBytes', bounds.ioBytes],
  ]
  for (const [figure, limit] of limits) if (counted[figure] > limit) return { figure, value: counted[figure] }
  // Each may be within, their sum not: the time is the run's on every CPU, user and system together.
  if (counted.cpuUserMs + counted.cpuSystemMs > bounds.cpuMs) return { figure: 'cpuSystemMs', value: counted.cpuSystemMs }
  return null
}
