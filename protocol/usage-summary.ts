import type { Task } from './task.js'
import { cpuTimeMs } from './usage.js'

/** What the summary reads of a task (a record, or a tool's view of one). */
export type SummarizedTask = Pick<Task, 'state' | 'exitCode' | 'signal' | 'startedAt' | 'endedAt'> & Partial<Pick<Task, 'usage' | 'live'>>

/**
 * One line of how a task stands or ended, for how long, and what it used:
 * `exited 0 after 41 s · CPU 2 m 3 s · peak 1.2 GiB` (an ended task with its usage), `running for
 * 2 m 5 s · CPU 97.5% · memory 300 MiB` (a running one with live figures). The agent tools' notices
 * and results say it; `now` (ms since the epoch, default the clock) times a running task.
 */
export function formatTaskSummary(task: SummarizedTask, now = Date.now()): string {
  const parts = [withTime(task, now)]
  if (task.usage) parts.push(`CPU ${formatSpan(cpuTimeMs(task.usage))}`, `peak ${formatBinaryBytes(task.usage.peakMemoryBytes)}`)
  else if (task.live && task.state === 'running') parts.push(`CPU ${task.live.cpuPercent}%`, `memory ${formatBinaryBytes(task.live.memoryBytes)}`)
  return parts.join(' · ')
}

/** The state in words, then the time it ran: `after` for an ended task, `for` a running one. */
function withTime(task: SummarizedTask, now: number): string {
  const started = task.startedAt === null ? null : Date.parse(task.startedAt)
  if (task.state === 'running') return started === null ? 'running' : `running for ${formatSpan(now - started)}`
  const words = stateWords(task)
  if (started === null || task.endedAt === null) return words
  return `${words} after ${formatSpan(Date.parse(task.endedAt) - started)}`
}

function stateWords(task: SummarizedTask): string {
  if (task.state === 'exited') return `exited ${task.exitCode}`
  if (task.state === 'killed') return task.signal ? `killed by ${task.signal}` : 'killed'
  if (task.state === 'timed_out') return 'timed out'
  return task.state
}

/** A time span in words a model reads at a glance: `350 ms`, `3.4 s`, `41 s`, `2 m 3 s`, `1 h 5 m`. */
export function formatSpan(ms: number): string {
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

const BINARY_UNITS = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB']

/** A size in binary units, one decimal below 100: `1023 B`, `1.5 KiB`, `200 MiB`, `1.2 GiB`. */
export function formatBinaryBytes(bytes: number): string {
  if (bytes < 1024) return `${Math.max(0, Math.round(bytes))} B`
  let value = bytes / 1024
  let index = 0
  while (value >= 1024 && index < BINARY_UNITS.length - 1) {
    value /= 1024
    index += 1
  }
  return `${value >= 100 ? Math.round(value) : value.toFixed(1)} ${BINARY_UNITS[index]}`
}
