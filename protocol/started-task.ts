import type { Task } from './task.js'

/**
 * What a start answers (POST /v1/tasks, TendClient.start): the task's record, and `warnings` beside
 * its fields when something about the start deserves a word (a fixed port another running task of
 * the same owner already listens on). `warnings` is never part of task.json; absent when none.
 */
export type StartedTask = Task & { warnings?: string[] }
