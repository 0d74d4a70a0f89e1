/**
 * What a task used, in its record once it has ended (`usage`). `source` says what measured it:
 * `cgroup`, the task's whole tree (peak memory included); `rusage`, what its keeper collected when it
 * reaped it: CPU and I/O of every process of the tree that was waited for, but `peakMemoryBytes` is
 * the largest single process's peak (ru_maxrss), not the tree's.
 */
export interface TaskUsage {
  cpuUserMs: number
  cpuSystemMs: number
  peakMemoryBytes: number
  readBytes: number
  writeBytes: number
  source: 'cgroup' | 'rusage'
}

/** A running task's figures now (sampled at most once a second, only when asked): CPU % of one core since the last sample, memory in use. */
export interface LiveUsage {
  cpuPercent: number
  memoryBytes: number
  sampledAt: string
}

/**
 * A task's CPU time, user and system together, in milliseconds: never past the safe-integer range
 * (each figure is a safe integer, their sum need not be: a record written before the daemon bounded
 * the figures may carry absurd ones).
 */
export function cpuTimeMs(usage: Pick<TaskUsage, 'cpuUserMs' | 'cpuSystemMs'>): number {
  return Math.min(usage.cpuUserMs + usage.cpuSystemMs, Number.MAX_SAFE_INTEGER)
}
