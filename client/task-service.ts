import type { DaemonStatus, ReadResult, Task, TaskEvent, TaskInputResult } from '../protocol/index.js'
import { TendClient, type KillOptions, type ListOptions, type ReadOptions, type StartOptions } from './client.js'
import { ClusterClient } from './cluster.js'
import { ClusterTasks } from './cluster-tasks.js'
import type { EventsOptions } from './events.js'
import { normalizeClusterChoice, type TendClientOptions } from './options.js'

/**
 * What an agent's tools ask of tend, for one owner: the local daemon (TendClient) answers it, and
 * so does a cluster (ClusterTasks), so that the tools work unchanged against either.
 */
export interface TaskService {
  start(options: StartOptions): Promise<Task>
  get(id: string): Promise<Task>
  list(options?: ListOptions): Promise<Task[]>
  read(id: string, options?: ReadOptions): Promise<ReadResult>
  wait(id: string, options?: { timeoutMs?: number; signal?: AbortSignal }): Promise<Task>
  kill(id: string, options?: KillOptions): Promise<Task>
  input(id: string, data: string | Buffer, options?: { eof?: boolean }): Promise<TaskInputResult>
  /** Where the event stream is now: `events({ since: lastSeq })` then misses nothing. */
  status(): Promise<Pick<DaemonStatus, 'events'>>
  events(options?: EventsOptions): AsyncIterable<TaskEvent>
  close(): void
}

export interface TaskServiceOptions extends TendClientOptions {
  /** A cluster's Redis (redis:// or rediss://): the tasks run on its workers. Default TEND_CLUSTER; unset: the local daemon. */
  cluster?: string
  /** The cluster's queue. Default TEND_CLUSTER_QUEUE, else the default queue. */
  clusterQueue?: string
  /** The cluster key's file, which seals tasks' environment values. Default TEND_CLUSTER_KEY_FILE. */
  clusterKeyFile?: string
}

/** The owner's tasks on the cluster the options (or the environment) name, else on the local daemon. */
export function connectTasks(options: TaskServiceOptions, owner: string): TaskService {
  const { cluster: _cluster, clusterQueue: _clusterQueue, clusterKeyFile: _clusterKeyFile, ...client } = options
  const chosen = normalizeClusterChoice(options)
  if (chosen === undefined) return new TendClient({ ...client, owner })
  return new ClusterTasks(new ClusterClient(chosen.redis, chosen.queue, { keyFile: chosen.keyFile }), owner)
}
