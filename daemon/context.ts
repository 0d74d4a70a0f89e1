import type { Logger } from 'pino'
import type { DaemonConfig } from './config.js'
import type { CorruptEntries } from './store/corrupt-entries.js'
import type { SandboxCapabilities } from './sandbox/index.js'
import type { EventLog } from './store/event-log.js'
import type { OutputWatch } from './tasks/output/output-watch.js'
import type { SpoolCleanup } from './store/spool-cleanup.js'
import type { Supervisor } from './tasks/supervisor.js'
import type { TaskInput } from './tasks/input/task-input.js'
import type { TaskStore } from './store/task-store.js'
import type { ConsoleControl } from './console/console-control.js'
import type { NetworkLedger } from './network/network-ledger.js'

/**
 * What the cluster worker reaches (daemon/cluster/): one object built at daemon start. Routes take
 * only what each names (daemon/http/api.ts).
 */
export interface DaemonContext {
  config: Readonly<DaemonConfig>
  /** What the machine can enforce, detected at start. */
  sandbox: SandboxCapabilities
  version: string
  startedAt: string
  store: TaskStore
  /** Spool entries that could not be loaded as tasks: listed, shown and removable, nothing else. */
  corrupt: CorruptEntries
  supervisor: Supervisor
  /** Writes to tasks' stdin pipes. */
  input: TaskInput
  /** Every decision of the egress proxy, per task: network.log and the record's networkUse. */
  network: NetworkLedger
  cleanup: SpoolCleanup
  events: EventLog
  outputWatch: OutputWatch
  log: Logger
  /** Asks the daemon to stop (answers at once; the stop happens after the reply is sent). */
  requestStop: (options?: { keepTasks?: boolean }) => void
  /** The operator console and its TCP listener (listening only once started). */
  console: ConsoleControl
  /** Closes live streams (event subscribers) so the server can close. */
  readonly closing: AbortSignal
}
