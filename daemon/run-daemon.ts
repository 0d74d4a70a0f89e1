import { closeSync, rmSync, writeSync } from 'node:fs'
import { chmod, mkdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { nanoid } from 'nanoid'
import { pino, type Logger } from 'pino'
import { TendError } from '../protocol/index.js'
import { isUnwritableHome, openHomeFileSync, unwritableDetail } from '../protocol/home-file.js'
import { skippedEntryText } from '../protocol/program-folders.js'
import type { DaemonConfig } from './config.js'
import type { DaemonContext } from './context.js'
import { CorruptEntries } from './store/corrupt-entries.js'
import { EventLog } from './store/event-log.js'
import { acquireInstanceLock, instanceLockHolder } from './store/instance-lock.js'
import { createLogDestination } from './log-destination.js'
import { OutputWatch } from './tasks/output/output-watch.js'
import { recoverSpool } from './tasks/recovery/recovery.js'
import { stopEntryLeftovers } from './tasks/recovery/entry-leftovers.js'
import type { GroupRoots } from './sandbox/cgroups.js'
import { createServer } from './http/server.js'
import type { TendApp } from './http/tend-app.js'
import { registerApi, registerSocketOnlyApi, type ApiDeps } from './http/api.js'
import { clearSocketPath, SocketWatch } from './http/socket-watch.js'
import { ConsoleControl } from './console/console-control.js'
import { createPeerCheck } from './peer/index.js'
import { startClusterWorker, type ClusterWorker } from './cluster/cluster-worker.js'
import { SubmissionIndex } from './store/submission-index.js'
import { SpoolCleanup } from './store/spool-cleanup.js'
import { readBootId } from './tasks/run/boot-id.js'
import { Supervisor } from './tasks/supervisor.js'
import { TaskInput } from './tasks/input/task-input.js'
import { createSpawner } from './spawn/create-spawner.js'
import { markSpoolTopDirectory } from './store/spool-topdir.js'
import { decideTaskIdentity, detectSandbox, removeDaemonCgroupFolders } from './sandbox/index.js'
import { networkCapabilities } from './network/capabilities.js'
import { OwnerNetworks } from './network/owner-networks.js'
import { cachedKnownHomes, currentRegistryUser, registerHome } from './store/home-registry.js'
import { cachedSharedRegistries, openRegistry, registryFolders, type OpenedRegistry } from './store/registry-folders.js'
import { everyUserPlaces } from './sandbox/every-user-places.js'
import { markHome } from './store/home-marker.js'
import { TaskStore } from './store/task-store.js'
import { SpoolReserve } from './store/spool-reserve.js'
import { readVersion } from './version.js'
import { precompiledCount, SCHEMA_CODE_PATH } from './precompiled/schema-code.js'
import { IdleMemoryRelease, loadMemoryRelease } from './memory/idle-release.js'
import { createServiceNotifier } from './service/service-notify.js'
import { NetworkLedger } from './network/network-ledger.js'
import { EgressService } from './network/egress-service.js'

export interface StopOptions {
  /** Leave running tasks to their keepers, for the next daemon (stop --keep-tasks, restart). */
  keepTasks?: boolean
}

export interface RunningDaemon {
  app: TendApp
  context: DaemonContext
  /** Resolves when the daemon has stopped (its tasks stopped and recorded, the socket closed). */
  stopped: Promise<void>
  stop: () => Promise<void>
}

/**
 * Logs go to daemon.log, or to stderr once that file fails (disk full): a log that cannot be
 * written never stops the daemon. Task output, environments and tokens are never logged.
 */
export function createDaemonLogger(config: Readonly<DaemonConfig>): Logger {
  return pino(
    {
      level: config.logLevel,
      base: { pid: process.pid },
      redact: { paths: ['env', '*.env', 'req.headers.authorization', 'body.env', 'baseEnv', 'data'], censor: '[redacted]' },
    },
    createLogDestination(config.layout.log),
  )
}

/**
 * Starts a daemon on config.layout: takes the instance lock, reloads the spool, listens on the
 * socket (0600 in a 0700 folder). Refuses with TEND_ERR_DAEMON_RUNNING when another daemon holds
 * the home.
 */
export async function startDaemon(config: Readonly<DaemonConfig>): Promise<RunningDaemon> {
  const { layout } = config
  const taken = await takeHome(layout)
  if (!taken) throw new TendError('TEND_ERR_DAEMON_RUNNING', { home: layout.home, pid: instanceLockHolder(layout.lock, layout.spool) })
  const lock = taken
  // Written as soon as the home is this daemon's: a daemon that answers always has its pid file.
  let pidFileMissing: unknown = null
  try {
    writePidFile(layout.home)
  } catch (error) {
    // A full disk must not keep the daemon from starting (it is what lets the operator free space,
    // and records land from the reserve): the pid file is for people; the lock says who runs.
    if (isDiskFull(error)) {
      pidFileMissing = error
      rmSync(pidFile(layout.home), { force: true })
    } else {
      lock.release()
      throw isUnwritableHome(error)
        ? new TendError('TEND_ERR_HOME_UNWRITABLE', { path: layout.home, detail: unwritableDetail(error) }, { cause: error })
        : error
    }
  }
  // A home is known by its marker, and to every daemon of this user by the registry, before any
  // task of any of them can be given it (docs/spool.md).
  const registryUser = currentRegistryUser()
  let registry: OpenedRegistry
  try {
    markHome(layout.home)
    registry = openRegistry(registryUser)
    registerHome(registry.dir, layout.home)
  } catch (error) {
    lock.release()
    throw error
  }

  const log = createDaemonLogger(config)
  if (pidFileMissing) log.warn({ err: pidFileMissing }, 'no room for daemon.pid on a full disk: started without it')
  const events = new EventLog(nanoid(10))
  // Made before any task runs: the room a task could fill is then already held back for records.
  const reserve = new SpoolReserve(join(layout.home, 'spool-reserve'), config.spoolReserveBytes, log)
  await reserve.start()
  const store = new TaskStore(layout.spool, events, log, undefined, reserve)
  const outputWatch = new OutputWatch()
  const corrupt = new CorruptEntries()
  const removedSubmissions = SubmissionIndex.load(layout.home, log)
  // Its cgroup folders are known once the sandbox is detected, below; nothing is removed before.
  let groupRoots: GroupRoots = { memory: null, pids: null }
  const cleanup = new SpoolCleanup(
    layout.spool,
    config.spoolQuotaBytes,
    store,
    corrupt,
    log,
    (task) => removedSubmissions.retire(task),
    (id) => stopEntryLeftovers(id, () => groupRoots),
  )
  const closingController = new AbortController()
  let requestStop: (options?: StopOptions) => void = () => {}
  // The probes of bubblewrap and the spawner's check are child processes: they run at once (detectSandbox
  // first: with cgroupRoot own, the daemon moves to its leaf before it starts any child).
  const [detected, spawner] = await Promise.all([
    detectSandbox({
      path: config.baseEnv.PATH,
      cgroupName: config.cgroupName,
      uid: process.getuid!(),
      home: layout.home,
      pidsMax: config.daemonPidsMax,
      cgroupRoot: config.cgroupRoot,
    }),
    createSpawner(config.spawner, log),
  ])
  // Who tasks run as needs both: a root daemon's own task identity takes the native spawner, and is probed with one spawn.
  const identity = await decideTaskIdentity({ config, spawner, bwrapPath: detected.bwrap?.path ?? null, workspaceMissing: detected.missing.workspace })
  for (const entry of config.pathSkipped) log.warn({ path: entry.path, reason: entry.reason }, skippedEntryText(entry))
  if (registry.unusable)
    log.warn(
      { unusable: registry.unusable.path, problem: registry.unusable.problem, registry: registry.dir },
      "the usual registry of tend homes is not this user's: another folder of its own keeps it",
    )
  if (identity.fallback) log.warn({ fallback: identity.fallback }, 'sandboxed tasks run as uid 0 (without capabilities), not on an identity of their own')
  if (!identity.keyring.fresh) log.warn({ reason: identity.keyring.reason }, "tasks share the daemon's session keyring")
  if (detected.cgroups.allDaemonsProblem) log.warn({ problem: detected.cgroups.allDaemonsProblem }, 'the tasks of all daemons together are not bounded')
  const sandbox = { ...detected, identity, network: networkCapabilities(detected, spawner) }
  const networks = sandbox.network.modes.includes('loopback') ? new OwnerNetworks(log) : null
  groupRoots = sandbox.cgroups
  if (config.sandbox !== 'off' && !sandbox.profiles.includes(config.sandbox)) {
    log.warn(
      { profile: config.sandbox, missing: sandbox.missing[config.sandbox] },
      'default sandbox profile unavailable: tasks that do not choose one will be refused',
    )
  }
  // Sandboxed tasks get every tend home masked, and none of them as a writable folder. Where they
  // act as someone else than the daemon (other folders' owners through idmapped mounts, or
  // taskUser), every user's places are theirs to keep apart too.
  const sharedRegistries = cachedSharedRegistries()
  const registries = () => registryFolders(registryUser, sharedRegistries())
  const daemonHomes = { homes: cachedKnownHomes(registries), registries, ...(identity.as !== 'daemon' ? { everyUser: everyUserPlaces(sharedRegistries) } : {}) }
  const network = new NetworkLedger(layout.spool, store, log)
  // Every owner's namespace gets the egress proxy and the DNS stub; each decision goes to the task's ledger.
  const egress = networks ? new EgressService({ networks, hosts: config.networkHosts, record: (id, decision) => network.record(id, decision), log }) : null
  const supervisor = new Supervisor({
    config,
    store,
    outputWatch,
    log,
    capabilities: sandbox,
    spawner,
    daemonHomes,
    networks,
    // A task's connections end with it (none outlives it in another process), and its final record carries them all.
    beforeEnding: async (id) => {
      await egress?.endTask(id)
      await network.flush(id)
    },
  })
  // Who may call: decided once, for the socket and for what the console reports of it.
  const peerCheck = createPeerCheck()
  if (!peerCheck.status.enforced) log.warn({ reason: peerCheck.status.reason }, 'peer check off: requests from sandboxed tasks will not be refused')
  const services: Omit<DaemonContext, 'console'> = {
    config,
    sandbox,
    version: readVersion(),
    startedAt: new Date().toISOString(),
    store,
    corrupt,
    supervisor,
    input: new TaskInput(store, layout.spool, log),
    network,
    cleanup,
    events,
    outputWatch,
    log,
    requestStop: (options) => requestStop(options),
    closing: closingController.signal,
  }
  // Joined once the socket serves (below); until then, and on a daemon of no cluster, status has no worker part.
  let cluster: ClusterWorker | null = null
  const api: ApiDeps = { ...services, peerStatus: peerCheck.status, workerStatus: (owner) => cluster?.status(owner) }
  // The console's listener serves the same API as the socket, over the same deps.
  const consoleControl = new ConsoleControl({ config, log, registerApi: (app) => registerApi(app, api) })
  // What the cluster worker reaches (daemon/cluster/).
  const context: DaemonContext = { ...services, console: consoleControl }

  await markSpoolTopDirectory(layout.spool, log)
  // Tasks of an earlier daemon that still run under their keepers are supervised again. The
  // spawner's pipes are unref'd: until the socket listens, this timer keeps the process alive
  // while recovery waits on them.
  const startingUp = setInterval(() => {}, 60_000)
  const recovered = await recoverSpool(layout.spool, store, corrupt, log, sandbox.cgroups, {
    bootId: readBootId(),
    resume: (task) => supervisor.resume(task),
    rewait: (task) => supervisor.rewait(task),
  })
  supervisor.rememberSubmissions(store.list({ all: true }), removedSubmissions)
  await cleanup.enforceQuota()
  // The quota is enforced on a timer, not after every task: it walks every task.
  const quotaTimer = setInterval(() => void cleanup.enforceQuota().catch((error: unknown) => log.error({ err: error }, 'spool quota failed')), 1000)
  quotaTimer.unref()

  const app = await createServer(log, peerCheck, (socketApp) => {
    registerApi(socketApp, api)
    registerSocketOnlyApi(socketApp, { console: consoleControl })
  })
  if (precompiledCount() === 0)
    log.warn({ path: SCHEMA_CODE_PATH }, 'no schema code from the build: validators and serializers are compiled at run time (slower first requests)')
  clearSocketPath(layout.socket)
  // The socket is made 0600 by the mask at bind: a chmod by path afterwards could reach a file
  // another process put there in between.
  const previousMask = process.umask(0o177)
  try {
    await app.listen({ path: layout.socket })
  } finally {
    process.umask(previousMask)
  }
  clearInterval(startingUp)
  const socketWatch = new SocketWatch(layout.socket, app.server, log, {
    path: layout.lock,
    dev: lock.dev,
    ino: lock.ino,
    home: { path: layout.home, ...lock.home },
    retake: () => lock.retakeFile(),
  })
  log.info({ socket: layout.socket, version: context.version, ...recovered }, 'daemon started')
  // Once the socket answers, not before: a unit ordered after tend's may connect at once.
  const serviceManager = createServiceNotifier(config.notifySocket, log)
  serviceManager.ready(`serving ${layout.socket}`)
  // A console that cannot listen (port taken) is logged: the daemon serves its socket regardless.
  if (config.console) await consoleControl.open().catch((error: unknown) => log.error({ err: error }, 'console not started'))
  cluster = config.clusterRedis ? await startClusterWorker(context) : null
  const memory = idleMemoryRelease(events, log)

  let stopping: Promise<void> | undefined
  const stop = (options: StopOptions = {}) => {
    stopping ??= (async () => {
      log.info({ keepTasks: options.keepTasks === true }, 'daemon stopping')
      serviceManager.stopping()
      clearInterval(quotaTimer)
      memory?.close()
      await cluster?.pause()
      await supervisor.shutdown({ keepTasks: options.keepTasks })
      networks?.closeAll()
      await cluster?.close({ keepTasks: options.keepTasks === true })
      closingController.abort()
      outputWatch.close()
      await consoleControl.close()
      socketWatch.close()
      await app.close()
      await network.close()
      await store.close()
      // Its folder of task groups, empty once its tasks are gone (a task kept running keeps it).
      removeDaemonCgroupFolders(sandbox.cgroups)
      // A task can have put a folder in its place: the lock is released all the same.
      await rm(pidFile(layout.home), { force: true }).catch((error: unknown) => log.warn({ err: error }, 'pid file not removed'))
      log.info('daemon stopped')
      log.flush()
      lock.release()
    })()
    return stopping
  }
  let markStopped!: () => void
  const stopped = new Promise<void>((resolve) => (markStopped = resolve))
  requestStop = (options) => void stop(options).then(markStopped, markStopped)
  return {
    app,
    context,
    stopped,
    stop: async () => {
      await stop()
      markStopped()
    },
  }
}

/** Releases malloc's free memory whenever the daemon turns quiet, starting now; null without the addon (logged). */
function idleMemoryRelease(events: EventLog, log: Logger): { close: () => void } | null {
  const loaded = loadMemoryRelease()
  if ('reason' in loaded) {
    log.warn({ reason: loaded.reason }, 'memory-release addon missing: an idle daemon keeps the memory malloc has freed')
    return null
  }
  const memory = new IdleMemoryRelease(loaded.release)
  const unsubscribe = events.subscribe(() => memory.activity())
  memory.activity()
  return {
    close: () => {
      unsubscribe()
      memory.close()
    },
  }
}

/**
 * Makes the home and its spool, then takes its instance lock (null: another daemon holds it). A home
 * the daemon cannot write (a read-only file system) is TEND_ERR_HOME_UNWRITABLE, not a raw errno.
 */
async function takeHome(layout: DaemonConfig['layout']): Promise<Awaited<ReturnType<typeof acquireInstanceLock>>> {
  try {
    await mkdir(layout.home, { recursive: true, mode: 0o700 })
    await chmod(layout.home, 0o700)
    await mkdir(layout.spool, { recursive: true, mode: 0o700 })
    return acquireInstanceLock(layout.lock, layout.spool)
  } catch (error) {
    if (isUnwritableHome(error)) throw new TendError('TEND_ERR_HOME_UNWRITABLE', { path: layout.home, detail: unwritableDetail(error) }, { cause: error })
    throw error
  }
}

const pidFile = (home: string) => `${home}/daemon.pid`

// In the home, which a task under `off` can write: no link followed, no FIFO waited on, a folder moved aside.
function writePidFile(home: string): void {
  const { fd } = openHomeFileSync(pidFile(home), { truncate: true })
  try {
    writeSync(fd, `${process.pid}\n`)
  } finally {
    closeSync(fd)
  }
}

function isDiskFull(error: unknown): boolean {
  const { code } = error as NodeJS.ErrnoException
  return code === 'ENOSPC' || code === 'EDQUOT'
}
