import type { Task } from '../../client/index.js'

/**
 * What an ended task cost, in one line for the model: `exited 0 after 41 s · CPU 2 m 3 s · peak
 * 1.2 GiB`. Null while it runs, and for a record without `usage` (a daemon that does not measure).
 * A peak measured by rusage is the largest single process's, and says so.
 */
export function costSummary(task: Task): string | null {
  const { usage } = task
  if (!usage || task.endedAt === null) return null
  const wallMs = task.startedAt === null ? null : Date.parse(task.endedAt) - Date.parse(task.startedAt)
  const peak = `peak ${spacedBytes(usage.peakMemoryBytes)}${usage.source === 'rusage' ? ' (largest process)' : ''}`
  return [
    `${howItEnded(task)}${wallMs === null ? '' : ` after ${spacedDuration(wallMs)}`}`,
    `CPU ${spacedDuration(usage.cpuUserMs + usage.cpuSystemMs)}`,
    peak,
  ].join(' · ')
}

function howItEnded(task: Task): string {
  if (task.state === 'exited') return `exited ${task.exitCode}`
  if (task.state === 'killed') return task.signal ? `killed by ${task.signal}` : 'killed'
  if (task.state === 'timed_out') return 'timed out'
  return task.state
}

/** `320 ms`, `1.5 s`, `41 s`, `2 m 3 s`, `2 h 5 m`: the units a reader takes in at a glance. */
export function spacedDuration(ms: number): string {
  const whole = Math.max(0, Math.round(ms))
  if (whole < 1000) return `${whole} ms`
  if (whole < 10_000) return `${Math.floor(whole / 100) / 10} s`
  const seconds = Math.floor(whole / 1000)
  if (seconds < 60) return `${seconds} s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 60) return seconds % 60 ? `${minutes} m ${seconds % 60} s` : `${minutes} m`
  const hours = Math.floor(minutes / 60)
  return minutes % 60 ? `${hours} h ${minutes % 60} m` : `${hours} h`
}

/** `900 B`, `1.5 KiB`, `200 MiB`, `1.2 GiB`: one decimal below 100 of a unit. */
export function spacedBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`
  const units = ['KiB', 'MiB', 'GiB', 'TiB']
  let value = bytes / 1024
  let index = 0
  while (value >= 1024 && index < units.length - 1) {
    value /= 1024
    index += 1
  }
  return `${value >= 100 ? Math.round(value) : value.toFixed(1)} ${units[index]}`
}
