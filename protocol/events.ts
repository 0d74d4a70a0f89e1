import type { Task } from './task.js'

export const EVENT_TYPES = [
  'task.queued',
  'task.started',
  'task.exited',
  'task.killed',
  'task.timed_out',
  'task.failed',
  'task.lost',
  'task.removed',
  'task.ready',
] as const
export type TaskEventType = (typeof EVENT_TYPES)[number]

/**
 * One lifecycle fact. `task.ready`: a running task's readiness settled (ready, or timed out); a task
 * that ends while waiting says so in its ending's event (`ready.failed: 'ended first'`). `seq` grows
 * by one per event within a daemon's life; `daemonId` names that life.
 */
export interface TaskEvent {
  seq: number
  daemonId: string
  type: TaskEventType
  at: string
  taskId: string
  owner: string
  task: Task
}

/**
 * The daemon's spool became unwritable (`writable: false`, `problem` says why: no space, read-only,
 * I/O errors) or writable again. Sent only to subscribers that ask for it (`spool=true`), as a named
 * SSE event `spool` without an id: it takes no sequence number, and is not replayed; a subscriber
 * that comes while the spool is unwritable is told so first.
 */
export interface SpoolEvent {
  type: 'spool'
  daemonId: string
  at: string
  writable: boolean
  problem: string | null
}

export function eventTypeForState(state: Task['state']): TaskEventType {
  return state === 'running' ? 'task.started' : (`task.${state}` as TaskEventType)
}
