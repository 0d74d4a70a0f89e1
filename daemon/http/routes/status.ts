import { DEFAULT_NETWORK } from '../../../protocol/index.js'
import type { TendApp } from '../server.js'
import type { DaemonContext } from '../../context.js'
import { type DaemonStatus } from '../../../protocol/index.js'
import { ErrorSchema, StatusSchema } from '../../../protocol/schemas.js'
import { requestOwner } from '../owner-scope.js'
import { sandboxBounds, seccompFilters, seccompSupported } from '../../sandbox/index.js'
import { TASK_ID_FIRST, TASK_ID_LAST } from '../../sandbox/owner-ids.js'
import type { PeerCheckStatus } from '../../peer/index.js'

/**
 * GET /v1/status — the daemon, its limits, its spool use and what it can enforce. Task counts are
 * the requester's: an owner counts only its own tasks, the operator every task.
 */
export function registerStatusRoute(app: TendApp, context: DaemonContext, peerCheck: PeerCheckStatus): void {
  app.get('/v1/status', { schema: { summary: 'Daemon status', response: { 200: StatusSchema, 400: ErrorSchema } } }, async (request): Promise<DaemonStatus> => {
    const owner = requestOwner(request)
    const tasks = context.store.list({ all: true, owner: owner ?? undefined })
    const count = (state: string) => tasks.filter((task) => task.state === state).length
    return {
      pid: process.pid,
      version: context.version,
      home: context.config.layout.home,
      socket: context.config.layout.socket,
      startedAt: context.startedAt,
      concurrency: context.config.concurrency,
      perOwnerConcurrency: context.config.perOwnerConcurrency,
      tasks: { queued: count('queued'), running: count('running'), finished: tasks.length - count('queued') - count('running') },
      events: { daemonId: context.events.daemonId, lastSeq: context.events.lastSeq },
      spool: { path: context.config.layout.spool, usedBytes: context.cleanup.usedBytes(), quotaBytes: context.config.spoolQuotaBytes, ...context.store.spoolState(), ...(owner === null ? { strayEntries: context.cleanup.strayEntries() } : {}) },
      spawner: context.supervisor.spawnerKind,
      peerCheck,
      sandbox: {
        default: context.config.sandbox,
        profiles: context.sandbox.profiles,
        missing: context.sandbox.missing,
        bubblewrap: context.sandbox.bwrap && { path: context.sandbox.bwrap.path, version: context.sandbox.bwrap.version },
        userNamespaces: context.sandbox.userNamespaces,
        cgroups: { memory: context.sandbox.cgroups.memory !== null, pids: context.sandbox.cgroups.pids !== null },
        seccomp: seccompSupported(),
        filters: seccompFilters(),
        identity: {
          as: context.sandbox.identity.as,
          uid: context.sandbox.identity.uid,
          gid: context.sandbox.identity.gid,
          range: context.sandbox.identity.as === 'task' ? { first: TASK_ID_FIRST, last: TASK_ID_LAST } : null,
          owners: context.sandbox.identity.owners?.list() ?? [],
          home: context.sandbox.identity.home,
          fallback: context.sandbox.identity.fallback,
          off: context.sandbox.identity.off,
        },
        keyring: context.sandbox.identity.keyring,
        bounds: sandboxBounds(context.sandbox, context.config),
        network: { default: DEFAULT_NETWORK, modes: context.sandbox.network.modes, missing: context.sandbox.network.missing, allow: [...context.config.networkAllow] },
      },
    }
  })
}
