export * from './errors.js'
export * from './events.js'
export * from './ids.js'
export * from './limits.js'
// Types only: the schema values (typebox) are the daemon's, imported from protocol/schemas.js, so
// that the client and the CLI never load a schema library.
export type {
  TaskIdParams,
  TerminalSizeBody,
  StartTaskBody,
  TaskInputBody,
  TaskInputResult,
  ListTasksQuery,
  ReadOutputQuery,
  ReadResult,
  WaitQuery,
  KillTaskBody,
  GcBody,
  GcResult,
  RemoveResult,
  DaemonStatus,
  WorkerStatus,
  EventsQuery,
  EventsHeaders,
  StopBody,
  ConsoleBody,
  ConsoleInfo,
} from './schemas.js'
export * from './task.js'
export * from './network.js'
export * from './units.js'
export * from './paths.js'
export * from './sandbox-hint.js'
export * from './sandbox-evidence.js'
export * from './stopped-by.js'
export * from './cluster.js'
export * from './terminal-text.js'
export * from './visible-text.js'
export * from './utf8-tail.js'
export * from './secret-file.js'
export * from './lock-holder.js'
export * from './signals.js'
export * from './proc-stat.js'
export * from './poll-until.js'
export * from './with-timeout.js'
export * from './backoff.js'
export * from './readiness.js'
export * from './ports.js'
export * from './started-task.js'
export * from './port-text.js'
export * from './usage.js'
export * from './dependencies.js'
export * from './usage-summary.js'
export * from './text-cut.js'
