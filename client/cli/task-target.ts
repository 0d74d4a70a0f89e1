import type { Labels } from '../../protocol/index.js'
import type { StartOptions } from '../client.js'
import type { LogsFlags } from './print-output.js'
import type { CliIo } from './output.js'
import type { KillAllOptions } from './kill-all.js'

/** How `tend kill` stops a task: its first signal and the grace before KILL. */
export interface KillOptions {
  signal?: string | number
  graceMs?: number
}

/** The help of a verb's task argument: what the local daemon resolves (GET /v1/tasks/resolve); a cluster's queue takes full ids only. */
export const TASK_REF_HELP = 'task id, name (the newest task of it) or unique id prefix of 4+ characters (a full id with --cluster)'

/** What `tend run` starts: the request, and what only a shared queue's workers honour. */
export interface RunRequest extends StartOptions {
  /** Labels a worker must have to take the task. */
  require?: Labels
  /** How many times the task runs again when lost with its worker. */
  retries?: number
}

/**
 * Where the CLI's task verbs act, resolved once per command: the local daemon (DaemonTarget), or
 * the shared queue the flags or the environment name (resolve-target.ts). Each verb
 * prints its answer and answers its exit code; the verb's own file parses its flags only.
 */
export interface TaskTarget {
  /**
   * Starts a task and prints it; with `wait`, streams its output and answers its exit status; with
   * `wait: 'ready'`, answers once its readiness settles (readiness.ts: printReadiness).
   */
  run(io: CliIo, request: RunRequest, wait: boolean | 'ready'): Promise<number>
  logs(io: CliIo, id: string, flags: LogsFlags): Promise<number>
  show(io: CliIo, id: string): Promise<number>
  kill(io: CliIo, id: string, options: KillOptions): Promise<number>
  /** `kill --all`: every running and queued task (one owner's with `owner`), once asked (kill-all.ts). */
  killAll(io: CliIo, options: KillAllOptions & KillOptions): Promise<number>
  /** Waits for its end (with `ready`: for its readiness to settle) and answers as `tend wait` does. */
  wait(io: CliIo, id: string, options: { timeoutMs?: number; ready?: boolean }): Promise<number>
  list(io: CliIo, options: { all?: boolean; owner?: string }): Promise<number>
  /** Forgets one finished task and deletes its spool. */
  remove(id: string): Promise<{ removed: string; freedBytes: number }>
  close(): Promise<void>
}
