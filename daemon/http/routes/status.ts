import { DEFAULT_NETWORK } from '../../../protocol/index.js'
import type { DaemonStatus, WorkerStatus } from '../../../protocol/index.js'
import { ErrorSchema, StatusSchema } from '../../../protocol/schemas.js'
import type { DaemonConfig } from '../../config.js'
import { nativeReport } from '../../native/artifacts.js'
import type { PeerCheckStatus } from '../../peer/index.js'
import { sandboxBounds, seccompFilters, seccompSupported, type SandboxCapabilities } from '../../sandbox/index.js'
import { TASK_ID_FIRST, TASK_ID_LAST } from '../../sandbox/owner-ids.js'
import type { EventLog } from '../../store/event-log.js'
import type { SpoolCleanup } from '../../store/spool-cleanup.js'
import type { TaskStore } from '../../store/task-store.js'
import type { Supervisor } from '../../tasks/supervisor.js'
import { OwnerHeaders, requestOwner } from '../owner-scope.js'
import { typedRoutes, type TendApp } from '../tend-app.js'

export interface StatusDeps {
  config: Readonly<DaemonConfig>
  /** What the machine can enforce, detected at start. */
  sandbox: SandboxCapabilities
  version: string
  startedAt: string
  store: Pick<TaskStore, 'list' | 'spoolState'>
  events: Pick<EventLog, 'daemonId' | 'lastSeq'>
  cleanup: Pick<SpoolCleanup, 'usedBytes' | 'strayEntries'>
  supervisor: Pick<Supervisor, 'spawnerKind'>
  /** Whether callers inside a sandbox are refused, decided once at start. */
  peerStatus: PeerCheckStatus
  /** This daemon's part in a shared queue, for the requester (null: an owner sees its own tasks only); undefined when it has none. */
  workerStatus: (owner: string | null) => WorkerStatus | undefined
}

/**
 * GET /v1/status — the daemon, its limits, its spool use and what it can enforce. Task counts are
 * the requester's: an owner counts only its own tasks, the operator every task.
 */
export function registerStatusRoute(app: TendApp, deps: StatusDeps): void {
  // Found once, as the daemon found its parts at start: a source build made later is used after a restart.
  const native = nativeReport()
  typedRoutes(app).get(
    '/v1/status',
    { schema: { summary: 'Daemon status', headers: OwnerHeaders, response: { 200: StatusSchema, 400: ErrorSchema } } },
    async (request): Promise<DaemonStatus> => {
      const owner = requestOwner(request)
      const tasks = deps.store.list({ all: true, owner: owner ?? undefined })
      const count = (state: string) => tasks.filter((task) => task.state === state).length
      return {
        pid: process.pid,
        version: deps.version,
        home: deps.config.layout.home,
        socket: deps.config.layout.socket,
        startedAt: deps.startedAt,
        concurrency: deps.config.concurrency,
        perOwnerConcurrency: deps.config.perOwnerConcurrency,
        tasks: { queued: count('queued'), running: count('running'), finished: tasks.length - count('queued') - count('running') },
        events: { daemonId: deps.events.daemonId, lastSeq: deps.events.lastSeq },
        spool: {
          path: deps.config.layout.spool,
          usedBytes: deps.cleanup.usedBytes(),
          quotaBytes: deps.config.spoolQuotaBytes,
          ...deps.store.spoolState(),
          ...(owner === null ? { strayEntries: deps.cleanup.strayEntries() } : {}),
        },
        spawner: deps.supervisor.spawnerKind,
        native,
        pathSkipped: [...deps.config.pathSkipped],
        worker: deps.workerStatus(owner),
        peerCheck: deps.peerStatus,
        sandbox: {
          default: deps.config.sandbox,
          profiles: deps.sandbox.profiles,
          missing: deps.sandbox.missing,
          bubblewrap: deps.sandbox.bwrap && { path: deps.sandbox.bwrap.path, version: deps.sandbox.bwrap.version },
          userNamespaces: deps.sandbox.userNamespaces,
          cgroups: { memory: deps.sandbox.cgroups.memory !== null, pids: deps.sandbox.cgroups.pids !== null, hierarchy: deps.sandbox.cgroups.hierarchy },
          seccomp: seccompSupported(),
          filters: seccompFilters(),
          identity: {
            as: deps.sandbox.identity.as,
            uid: deps.sandbox.identity.uid,
            gid: deps.sandbox.identity.gid,
            range: deps.sandbox.identity.as === 'task' ? { first: TASK_ID_FIRST, last: TASK_ID_LAST } : null,
            owners: deps.sandbox.identity.owners?.list() ?? [],
            home: deps.sandbox.identity.home,
            fallback: deps.sandbox.identity.fallback,
            off: deps.sandbox.identity.off,
          },
          keyring: deps.sandbox.identity.keyring,
          bounds: sandboxBounds(deps.sandbox, deps.config),
          network: { default: DEFAULT_NETWORK, modes: deps.sandbox.network.modes, missing: deps.sandbox.network.missing, allow: [...deps.config.networkAllow] },
        },
      }
    },
  )
}
