import type { Logger } from 'pino'
import { DEFAULT_LIFETIME, DEFAULT_OWNER, isTaskId, TendError, type SandboxProfile, type StartTaskBody, type Task } from '../../../protocol/index.js'
import { newTaskId } from '../../../protocol/task-id.js'
import { taskDir } from '../../../spool/index.js'
import type { DaemonConfig } from '../../config.js'
import { resolveTaskPaths, type ProtectedView, type SandboxCapabilities, type TaskPaths } from '../../sandbox/index.js'
import { admissionIdentity, ownerIdsOf } from '../../sandbox/task-identity.js'
import { newRunName } from '../../spawn/run-name.js'
import type { Spawner } from '../../spawn/spawner.js'
import type { TaskStore } from '../../store/task-store.js'
import { checkStartRequest } from './admission.js'
import { checkDependencies } from './dependencies.js'
import { vanishingWriteWarnings } from './vanishing-writes.js'
import { writeLease } from '../../spawn/keeper-lease.js'
import type { LaunchNeeds } from '../run/task-run-context.js'
import { normalizeReadyCondition } from '../ready/ready-condition.js'
import { createQueuedTask } from '../transitions.js'
import type { PortAllocator, PortReservation } from '../ports/auto-port.js'

/** How a task is admitted besides its request: never part of an HTTP body. */
export interface StartOptions {
  /** A retry of the same submission with this key answers the first task. Default: none. */
  idempotencyKey?: string
  /** The request acts for an owner (an agent), not the operator: it may not widen the task's network (allowNet). Default: false. */
  actingForOwner?: boolean
  /** The id the task has wherever it runs (one given by whoever started it elsewhere, e.g. a queued job), checked. Default: a new one. */
  id?: string
  /**
   * The task ends when this daemon ends, however it ends (SIGKILL included), instead of running on
   * for the next daemon: for a task that may be run again elsewhere (a retried job), which must
   * never run twice at once. A later daemon records it lost; a restart stops it first. Needs the
   * native spawner (under the node one the task fails, saying why). Default: false.
   */
  endsWithDaemon?: boolean
  /**
   * The task runs only while it holds a lease: its keeper ends it, on its own, once the lease runs
   * out (daemon/spawn/keeper-lease.ts). The first lease lasts this long from admission (in ms); who
   * started the task renews it with writeLease. Implies endsWithDaemon. Default: none.
   */
  leaseMs?: number
}

/** What admission reads besides the request. */
export interface AdmissionContext {
  config: Readonly<DaemonConfig>
  store: TaskStore
  capabilities: SandboxCapabilities
  spawner: Spawner
  log: Logger
  /** What sandboxed tasks may not be given and get masked. */
  protectedView: () => ProtectedView
  /** Hands out `port: 'auto'`. */
  autoPorts: PortAllocator
}

/**
 * Checks a start request and records the task queued: its spool folder and record exist when this
 * resolves (a task that cannot be written, on a full disk, is refused and leaves nothing). Answers
 * the task and what its launch needs that is never persisted.
 */
export async function admitTask(
  context: AdmissionContext,
  request: StartTaskBody,
  submission: { idempotencyKey: string; requestHash: string } | null,
  options: StartOptions,
): Promise<{ task: Task; needs: LaunchNeeds }> {
  const { config, capabilities } = context
  const givenId = options.id
  if (givenId !== undefined && !isTaskId(givenId)) throw new TendError('TEND_ERR_INVALID_TASK_ID', { id: givenId })
  const { sandbox, tty, limits, network, allowNet } = checkStartRequest(request, {
    defaultSandbox: config.sandbox,
    capabilities,
    spawnerKind: context.spawner.kind,
    limitDefaults: config,
    actingForOwner: options.actingForOwner === true,
  })
  const readyWhen = normalizeReadyCondition(request.ready)
  const owner = request.owner ?? DEFAULT_OWNER
  const after = checkDependencies(request, (id) => context.store.find(id), { owner: options.actingForOwner ? owner : null, id: givenId })
  const writablePaths = request.writablePaths ?? []
  const paths = await admittedPaths(context, { sandbox, owner, cwd: request.cwd, writablePaths })
  const sandboxWritable = paths.writable.map((entry) => entry.path)
  const command = request.shell ? ['sh', '-c', request.command[0]!] : request.command
  const warnings = vanishingWriteWarnings({ sandbox, command, skipped: paths.skipped, writable: sandboxWritable })
  const id = givenId ?? newTaskId()
  const spool = taskDir(config.layout.spool, id)
  // Picked after the last wait, and held in memory until the record (which holds it from then on) is in the store.
  const reservation: PortReservation | null = request.port === 'auto' ? await context.autoPorts.reserve(owner, sandbox !== 'off' && network !== 'host') : null
  const port = reservation?.port ?? (typeof request.port === 'number' ? request.port : null)
  // PORT is the task's whatever its env says: it asked for a port.
  const env = port === null ? (request.env ?? {}) : { ...request.env, PORT: String(port) }
  const fields = {
    id,
    name: request.name ?? null,
    owner,
    command,
    shell: request.shell ?? false,
    cwd: paths.cwd.path,
    envKeys: Object.keys(env),
    lifetime: request.lifetime ?? DEFAULT_LIFETIME,
    stdin: tty ? 'pipe' : (request.stdin ?? 'null'),
    tty,
    timeoutMs: request.timeoutMs ?? null,
    maxOutputBytes: request.maxOutputBytes ?? config.maxOutputBytes,
    outputBytes: 0,
    sandbox,
    network,
    ...(allowNet.length > 0 ? { allowNet } : {}),
    ...(after ? { after } : {}),
    writablePaths,
    sandboxWritable,
    memoryBytes: limits.memoryBytes,
    pidsMax: limits.pidsMax,
    createdAt: new Date().toISOString(),
    spool,
    run: newRunName(id),
    // Waiting from admission on: a task that ends before it is ready says so (transitions.ts).
    ...(readyWhen ? { readyWhen, ready: null } : {}),
    ...(port === null ? {} : { port }),
    ...(reservation ? { portAuto: true } : {}),
    ...(warnings.length > 0 ? { warnings } : {}),
  }
  // Named fields after a spread, not a spread after fields: see createQueuedTask.
  const task = createQueuedTask(submission ? { ...fields, idempotencyKey: submission.idempotencyKey, requestHash: submission.requestHash } : fields)
  try {
    await context.store.create(task)
  } finally {
    reservation?.release()
  }
  // Before the task can start: its keeper finds the lease there from its first look.
  if (options.leaseMs !== undefined) await writeLease(spool, options.leaseMs)
  context.log.info({ taskId: id, owner: task.owner }, 'task queued')
  return { task, needs: { env, paths, endsWithDaemon: options.endsWithDaemon === true || options.leaseMs !== undefined } }
}

/**
 * The folders a task may use, decided on real paths and pinned: the folders checked now are the
 * folders the task gets. At admission, and again for a task recovery hands back to wait for its
 * dependencies (the pins of the daemon that admitted it died with it).
 */
export async function admittedPaths(
  context: Pick<AdmissionContext, 'config' | 'capabilities' | 'protectedView'>,
  task: { sandbox: SandboxProfile; owner: string; cwd: string; writablePaths: string[] },
): Promise<TaskPaths> {
  const { config, capabilities } = context
  // A sandboxed task on its own identity reaches its folders as its owner's uid (given at the owner's first task).
  const own = task.sandbox === 'off' ? null : await ownerIdsOf(capabilities.identity, task.owner)
  return resolveTaskPaths({
    profile: task.sandbox,
    cwd: task.cwd,
    writablePaths: task.writablePaths,
    configWritablePaths: config.writablePaths,
    // Only a sandbox refuses protected places; finding them (every live daemon's home, the secret paths) costs ~0.3 ms.
    protectedPlaces: task.sandbox === 'off' ? [] : context.protectedView().places,
    ...admissionIdentity(capabilities.identity, own && 'uid' in own ? own : null),
  })
}
