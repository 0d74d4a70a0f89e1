import type { Logger } from 'pino'
import type { DaemonConfig } from '../config.js'
import type { OwnerNetworks } from '../network/owner-networks.js'
import { cachedProtectedView, type DaemonHomes, type SandboxCapabilities } from '../sandbox/index.js'
import type { Spawner } from '../spawn/spawner.js'
import type { TaskStore } from '../store/task-store.js'
import type { OutputWatch } from './output/output-watch.js'
import { readBootId } from './run/boot-id.js'
import type { TaskRunContext } from './run/task-run-context.js'

/** What a Supervisor is made with. */
export interface SupervisorOptions {
  config: Readonly<DaemonConfig>
  store: TaskStore
  outputWatch: OutputWatch
  log: Logger
  capabilities: SandboxCapabilities
  spawner: Spawner
  /** Every live tend daemon's home and registry, masked from sandboxed tasks. Default: none. */
  daemonHomes?: DaemonHomes
  /** The owners' private networks (loopback and allow); null where none can be made. Default: null. */
  networks?: OwnerNetworks | null
  /** Runs before a started task's ending is recorded, which then carries what it did (the network ledger's flush). Default: nothing. */
  beforeEnding?: (id: string) => Promise<void>
}

/** The context all of a supervisor's runs share: its options with their defaults, and what the supervisor itself holds. */
export function createTaskRunContext(options: SupervisorOptions, held: Pick<TaskRunContext, 'outputs' | 'daemon' | 'forget'>): TaskRunContext {
  const { config } = options
  return {
    config,
    store: options.store,
    log: options.log,
    spawner: options.spawner,
    capabilities: options.capabilities,
    networks: options.networks ?? null,
    outputs: held.outputs,
    outputWatch: options.outputWatch,
    protectedView: cachedProtectedView(config, options.daemonHomes ?? { homes: () => [], registries: () => [] }),
    bootId: readBootId(),
    beforeEnding: options.beforeEnding ?? (() => Promise.resolve()),
    daemon: held.daemon,
    forget: held.forget,
  }
}
