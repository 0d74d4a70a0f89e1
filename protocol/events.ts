import type { Task } from './task.js'

export const EVENT_TYPES = ['task.queued', 'task.started', 'task.exited', 'task.killed', 'task.timed_out', 'task.failed', 'task.lost', 'task.removed'] as const
export type TaskEventType = (typeof EVENT_TYPES)[number]

/** One lifecycle fact. `seq` grows by one per event within a daemon's life; `daemonId` names that life. */
export interface TaskEvent {
  seq: number
  daemonId: string
  type: TaskEventType
  at: string
  taskId: string
  owner: string
  task: Task
}

export function eventTypeForState(state: Task['state']): TaskEventType {
  return state === 'running' ? 'task.started' : (`task.${state}` as TaskEventType)
}
