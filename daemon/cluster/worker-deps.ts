import type { Logger } from 'pino'
import type { DaemonConfig } from '../config.js'
import type { ConsoleControl } from '../console/console-control.js'
import type { EventLog } from '../store/event-log.js'
import type { SpoolCleanup } from '../store/spool-cleanup.js'
import type { TaskStore } from '../store/task-store.js'
import type { Supervisor } from '../tasks/supervisor.js'
import type { TaskInput } from '../tasks/input/task-input.js'

/** The daemon's settings a worker reads: the cluster's own, the default sandbox, and its home (its default name). */
export type WorkerSettings = Readonly<
  Pick<
    DaemonConfig,
    | 'sandbox'
    | 'layout'
    | 'clusterRedis'
    | 'clusterQueue'
    | 'clusterConcurrency'
    | 'clusterLabels'
    | 'clusterStallMs'
    | 'clusterAllowSandbox'
    | 'clusterKeyFile'
    | 'clusterName'
    | 'clusterNotices'
  >
>

/** What running one job uses of its daemon: it admits the job's task, waits for its end, and removes an attempt's record. */
export interface JobDeps {
  config: WorkerSettings
  log: Logger
  supervisor: Pick<Supervisor, 'admitting' | 'start' | 'kill'>
  store: Pick<TaskStore, 'find' | 'whenState' | 'whenFinished'>
  cleanup: Pick<SpoolCleanup, 'remove'>
}

/**
 * What a cluster worker uses of its daemon: what its jobs use, and to answer kills and requests
 * (a task's stdin, its removal), to follow endings, and to open the console other machines read
 * output through. A DaemonContext is one.
 */
export interface WorkerDeps extends JobDeps {
  store: Pick<TaskStore, 'find' | 'get' | 'list' | 'whenState' | 'whenFinished'>
  input: Pick<TaskInput, 'send'>
  events: Pick<EventLog, 'subscribe'>
  console: Pick<ConsoleControl, 'open'>
}
