// The live figures of running tasks, as the polls bring them (`live` of GET /v1/tasks?live=true):
// the latest for the CPU and MEM columns, the last minute or so for the task's chart. Kept in the
// page only; a task's figures go when the task does.

import * as store from './task-store.js'

/** How far back a task's chart goes. */
export const HISTORY_MS = 75_000
/** A figure older than this is not shown as the task's current use (the polls stopped: the page was hidden). */
const STALE_MS = 5000

const histories = new Map()
const listeners = new Set()

store.subscribe((kind, task) => {
  if (kind === 'remove') histories.delete(task.id)
})

/** listener(id) after a task got a new sample. */
export function subscribe(listener) {
  listeners.add(listener)
  return () => listeners.delete(listener)
}

/** Adds a running task's sample; the same sample served twice is kept once. */
export function record(id, live) {
  const time = Date.parse(live?.sampledAt)
  if (!Number.isFinite(time) || !Number.isFinite(live.cpuPercent) || !Number.isFinite(live.memoryBytes)) return
  let samples = histories.get(id)
  if (!samples) histories.set(id, (samples = []))
  if (samples.length > 0 && samples[samples.length - 1].time >= time) return
  // `time` is the daemon's clock (the chart's axis), `seen` the page's (whether it is current).
  samples.push({ time, seen: Date.now(), cpu: live.cpuPercent, mem: live.memoryBytes })
  while (samples.length > 0 && samples[0].time < time - HISTORY_MS) samples.shift()
  for (const listener of listeners) listener(id)
}

/** The task's samples, oldest first (the array itself: callers only read it). */
export function samplesOf(id) {
  return histories.get(id) ?? []
}

/** Its latest sample, unless it is too old to stand for now. */
export function currentOf(id, now = Date.now()) {
  const samples = histories.get(id)
  const last = samples?.[samples.length - 1]
  return last && now - last.seen <= STALE_MS ? last : undefined
}
