import type { DaemonStatus, ReadResult, StartedTask, Task, TaskEvent, TaskInputResult } from '../protocol/index.js'
import type { KillOptions, ListOptions, ReadOptions, StartOptions } from './client.js'
import type { EventsOptions } from './events.js'

/**
 * What an agent's tools ask of tend, for one owner: the local daemon (TendClient) answers it, and
 * so does a shared queue's (connect-tasks.ts picks one), so that the tools work unchanged against either.
 */
export interface TaskService {
  /** The task's record, with `warnings` beside it when the start deserves a word (a port another task serves). */
  start(options: StartOptions): Promise<StartedTask>
  get(id: string): Promise<Task>
  list(options?: ListOptions): Promise<Task[]>
  read(id: string, options?: ReadOptions): Promise<ReadResult>
  wait(id: string, options?: { timeoutMs?: number; signal?: AbortSignal }): Promise<Task>
  /** Resolves with the task once its readiness has settled (ready, failed, or it ended), or with its current record after timeoutMs. */
  waitReady(id: string, options?: { timeoutMs?: number; signal?: AbortSignal }): Promise<Task>
  kill(id: string, options?: KillOptions): Promise<Task>
  input(id: string, data: string | Buffer, options?: { eof?: boolean }): Promise<TaskInputResult>
  /** Where the event stream is now: `events({ since: lastSeq })` then misses nothing. */
  status(): Promise<Pick<DaemonStatus, 'events'>>
  events(options?: EventsOptions): AsyncIterable<TaskEvent>
  close(): void
}
