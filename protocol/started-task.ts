import type { Task } from './task.js'

/**
 * What a start answers (POST /v1/tasks, TendClient.start): the task's record, its `warnings` those
 * of the record (writes that would vanish, kept in task.json for tend show) followed by those only
 * the start says (a fixed port another running task of the same owner already listens on, never
 * kept); absent when none.
 */
export type StartedTask = Task & { warnings?: string[] }
