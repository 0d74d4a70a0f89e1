import type { Logger } from 'pino'
import type { StartTaskBody, Task } from '../../../protocol/index.js'
import type { OwnerNetworks } from '../../network/owner-networks.js'
import type { TaskStore } from '../../store/task-store.js'
import { PortAllocator } from './auto-port.js'
import { portConflictWarnings } from './port-conflicts.js'
import { PortWatch } from './port-watch.js'

/** What TaskPorts is made with. */
export interface TaskPortsOptions {
  store: TaskStore
  log: Logger
  /** The owners' private networks: an owner's auto ports are picked free in its own. Null where none can be made. */
  networks: OwnerNetworks | null
  /** The most auto ports one owner's tasks not ended may hold at once (config `perOwnerAutoPorts`). */
  perOwnerAutoPorts: number
  /** A running task's processes now (task-processes.ts); null when it is not running here. */
  processesOf: (id: string) => Promise<number[]> | null
}

/** The ports of a supervisor's tasks: what they listen on, what `port: 'auto'` hands them, and a start's conflicts. */
export class TaskPorts {
  /** Running tasks' listening sockets, looked at when their records are served (port-watch.ts). */
  readonly watch: PortWatch
  /** `port: 'auto'`'s ports: held by the records of tasks not ended yet (auto-port.ts). */
  readonly auto: PortAllocator
  private readonly store: TaskStore

  constructor(options: TaskPortsOptions) {
    const { store, log, networks } = options
    this.store = store
    this.watch = new PortWatch({ store, log, processesOf: options.processesOf })
    this.auto = new PortAllocator({
      tasks: { list: () => store.list(), subscribe: (listener) => store.subscribe(listener) },
      namespaceProcessOf: (owner) => networks?.networkOf(owner)?.pid ?? null,
      perOwner: options.perOwnerAutoPorts,
    })
  }

  /** Warnings for a start asking for a port another running task of its owner listens on (port-conflicts.ts). */
  conflictWarnings(task: Task, request: StartTaskBody): Promise<string[]> {
    return portConflictWarnings(task, request, { store: this.store, ports: this.watch })
  }
}
