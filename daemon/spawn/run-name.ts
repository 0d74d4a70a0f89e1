import { randomBytes } from 'node:crypto'
import type { Task } from '../../protocol/index.js'

/** Every process of a task run by a daemon that names its runs carries this variable (its `run`). */
export const TASK_RUN_VARIABLE = 'TEND_TASK_RUN'
/** Every task's processes carry its id too (tasks read it); records of older daemons have only this to find them by. */
export const TASK_ID_VARIABLE = 'TEND_TASK_ID'

/**
 * A new run name for a task admitted now: its id and random bytes, so unique to this daemon and
 * this admission. A task given its id from outside keeps it on every daemon and in every attempt,
 * and daemons share machines and /proc: the processes a daemon finds by their marker are those of its own run,
 * never another daemon's run of the same task, nor another attempt of it. (Task cgroups are in a
 * folder of each daemon's own, cgroup-parent.ts, and a daemon holds one run of a task id at a time:
 * the earlier run's record and groups go before the next is admitted.)
 */
export function newRunName(id: string): string {
  return `${id}.${randomBytes(8).toString('hex')}`
}

/** The environment entry (`NAME=value`) that marks every process of this run of the task. */
export function taskMarker(task: Pick<Task, 'id' | 'run'>): string {
  return task.run === undefined ? `${TASK_ID_VARIABLE}=${task.id}` : `${TASK_RUN_VARIABLE}=${task.run}`
}
