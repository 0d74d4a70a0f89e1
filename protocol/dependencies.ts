/**
 * Tasks a task waits for (`--after`): it stays `queued` until every one of `ids` has ended, then starts
 * if all exited 0 (or whatever they ended as, with `any`); otherwise it ends `failed`, its reason naming
 * the first that did not (`dependency abc exited 2`).
 */
export interface TaskDependencies {
  ids: string[]
  any: boolean
}

/** The most tasks one task may wait for. */
export const AFTER_MAX = 64
