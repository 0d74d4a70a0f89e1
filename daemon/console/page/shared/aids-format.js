// Readiness, usage and dependencies as short text for people. Plain strings for textContent, as
// in format.js: nothing here builds HTML.

import { formatBytes, formatDuration, formatTime, visible } from './format.js'

/**
 * Where a task is on its readiness condition: '' (none), `pending` (queued: the clock starts with
 * the task), `waiting` (running), `ready` or `failed`.
 */
export function readinessKind(task) {
  if (!task.ready) {
    if (!task.readyWhen) return ''
    return task.state === 'queued' ? 'pending' : task.state === 'running' ? 'waiting' : ''
  }
  return 'failed' in task.ready ? 'failed' : 'ready'
}

/** What the condition waits for: a pattern, a port or a URL. */
export function conditionText(condition) {
  if (!condition) return 'its condition'
  if (condition.pattern !== undefined) return `a line matching /${visible(condition.pattern)}/`
  if (condition.port !== undefined) return `something listening on port ${Number(condition.port)}`
  if (condition.url !== undefined) return `${visible(condition.url)} to answer`
  return 'its condition'
}

/** The task view's readiness line: waiting for …, ready at … by …, or not ready, why. */
export function readinessText(task) {
  const kind = readinessKind(task)
  if (kind === '') return task.readyWhen ? `not ready: it ended waiting for ${conditionText(task.readyWhen)}` : 'no condition'
  const limit = task.readyWhen?.timeoutMs ? ` (up to ${formatDuration(task.readyWhen.timeoutMs)})` : ''
  if (kind === 'pending') return `once started, waits for ${conditionText(task.readyWhen)}${limit}`
  if (kind === 'waiting') return `waiting for ${conditionText(task.readyWhen)}${limit}`
  if (kind === 'failed') return `not ready: ${visible(task.ready.failed)} (${formatTime(task.ready.at)})`
  const line = task.ready.line !== undefined ? `: “${visible(task.ready.line)}”` : ''
  return `ready at ${formatTime(task.ready.at)} by ${visible(task.ready.by)}${line}`
}

/** The short note beside a task's state in the table: what a queued task waits for, a running one's readiness. */
export function stateNote(task) {
  // The count only: the column is narrow, and the title names them.
  if (task.state === 'queued' && task.after?.ids?.length) return `after ${task.after.ids.length}`
  const kind = readinessKind(task)
  return kind === 'failed' ? 'not ready' : kind === 'pending' ? '' : kind
}

/** The dependencies in a sentence: `all of them exit 0` or `each ends, however`. */
export function afterText(after) {
  if (!after?.ids?.length) return ''
  const count = after.ids.length === 1 ? 'it ends' : `all ${after.ids.length} end`
  return after.any ? `starts once ${count}, however` : `starts once ${count} with exit 0`
}

/** CPU time: tenths of a second below a minute, where most tasks are. */
export function formatCpuTime(ms) {
  if (!Number.isFinite(ms) || ms < 0) return '?'
  return ms < 60_000 ? `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)}s` : formatDuration(ms)
}

/** A live CPU figure: percent of one core (a task using four cores shows 400%). */
export function formatCpuPercent(percent) {
  if (!Number.isFinite(percent) || percent < 0) return '?'
  return `${percent < 10 ? Number(percent.toFixed(1)) : Math.round(percent)}%`
}

/** The CPU and MEM columns: live figures while it runs, its CPU time and peak memory once it ended, else empty. */
export function usageCells(task, sample) {
  if (task.state === 'running') return sample ? { cpu: formatCpuPercent(sample.cpu), mem: formatBytes(sample.mem) } : { cpu: '', mem: '' }
  const usage = task.usage
  if (!usage) return { cpu: '', mem: '' }
  return { cpu: formatCpuTime(usage.cpuUserMs + usage.cpuSystemMs), mem: formatBytes(usage.peakMemoryBytes) }
}

/** What a finished task used, in full, saying what measured the peak. */
export function usageText(usage) {
  if (!usage) return '—'
  const peak = usage.source === 'rusage' ? 'peak memory of its largest process' : 'peak memory'
  return (
    `CPU ${formatCpuTime(usage.cpuUserMs + usage.cpuSystemMs)} (user ${formatCpuTime(usage.cpuUserMs)}, system ${formatCpuTime(usage.cpuSystemMs)})` +
    ` · ${peak} ${formatBytes(usage.peakMemoryBytes)} · read ${formatBytes(usage.readBytes)}, written ${formatBytes(usage.writeBytes)}`
  )
}
