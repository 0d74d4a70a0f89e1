import { cpuTimeMs, formatBinaryBytes, formatBytes, formatDuration, formatSpan, type Task } from '../../protocol/index.js'

// What a task uses and used, as the CLI prints it: `tend ps`'s CPU and MEM columns, `tend show`'s
// `now` and `used` lines (the figures: docs/api.md, `usage` and `live`).

/** `tend ps`'s CPU column: CPU % now for a running task (asked live), CPU time for an ended one, else `-`. */
export function cpuCell(task: Task): string {
  if (task.state === 'running' && task.live) return `${Math.round(task.live.cpuPercent)}%`
  if (task.usage) return formatDuration(cpuTimeMs(task.usage))
  return '-'
}

/** `tend ps`'s MEM column: memory now for a running task, the peak for an ended one, else `-`. */
export function memoryCell(task: Task): string {
  if (task.state === 'running' && task.live) return formatBytes(task.live.memoryBytes)
  if (task.usage) return formatBytes(task.usage.peakMemoryBytes)
  return '-'
}

/** `tend show`'s line for a running task's live figures; null without them. */
export function liveText(task: Task): string | null {
  if (task.state !== 'running' || !task.live) return null
  return `CPU ${task.live.cpuPercent}%, memory ${formatBinaryBytes(task.live.memoryBytes)}`
}

/** `tend show`'s line for what an ended task used, saying what the peak measures; null without figures. */
export function usageText(task: Task): string | null {
  const usage = task.usage
  if (!usage) return null
  const cpu = `CPU ${formatSpan(cpuTimeMs(usage))} (user ${formatSpan(usage.cpuUserMs)}, system ${formatSpan(usage.cpuSystemMs)})`
  const peak = `peak ${formatBinaryBytes(usage.peakMemoryBytes)} (${usage.source === 'cgroup' ? 'whole tree' : 'largest process'})`
  return `${cpu}, ${peak}, read ${formatBinaryBytes(usage.readBytes)}, written ${formatBinaryBytes(usage.writeBytes)}`
}
