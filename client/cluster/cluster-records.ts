import type { Job } from 'bullmq'
import {
  currentStoppedBy,
  DEFAULT_LIFETIME,
  DEFAULT_NETWORK,
  DEFAULT_OWNER,
  networkModeOf,
  DEFAULT_TERMINAL_SIZE,
  isFinished,
  isWorkerName,
  LOST_PREFIX,
  type ClusterAttempt,
  type ClusterJobData,
  type ClusterProgress,
  type StartTaskBody,
  type RequestedStop,
  type Task,
  type TaskBase,
} from '../../protocol/index.js'

/** A cluster task as the queue knows it: where it is, and its final record once it has ended. */
export interface ClusterTask {
  id: string
  /** The queue it was put on (the base queue and its requirements). */
  queue: string
  /** Who it is for. */
  owner: string
  /** Its name, from its start request (null: none). */
  name: string | null
  /** Its command, from its start request, as its record has it. */
  command: string[]
  /** Its command is a shell line (`sh -c LINE`), as its record has it: its label is the line. */
  shell: boolean
  /** queued (waiting for a worker), a task state while a worker runs it, or its final state. */
  state: string
  /** The worker that took it; null while it waits. */
  worker: string | null
  /** Its final record, once it has ended. */
  task: Task | null
  /** Why BullMQ failed the job (the worker could not start it), when it did. */
  reason: string | null
  /** Which run of the task this is (or was, once ended): 1, then one more per retry. */
  attempt: number
  /** The earlier attempts, each lost with its worker, oldest first. */
  earlier: ClusterAttempt[]
}

export type ClusterJob = Job<ClusterJobData, Task>

/** Where a job is, from its BullMQ state and what its worker reported on it. */
export function describeJob(id: string, queue: string, job: ClusterJob, state: string): ClusterTask {
  const progress = progressOf(job)
  const owner = typeof job.data.request.owner === 'string' ? job.data.request.owner : DEFAULT_OWNER
  const known = {
    id,
    queue,
    owner,
    ...nameAndCommand(job.data),
    worker: reportedWorker(progress),
    attempt: progress?.attempt ?? 1,
    earlier: progress?.earlier ?? [],
  }
  if (state === 'completed' && job.returnvalue && isFinished(job.returnvalue)) {
    // An older worker's record may name its stop as it was called then.
    const task = { ...job.returnvalue, stoppedBy: currentStoppedBy(job.returnvalue.stoppedBy) } as Task
    return { ...known, state: task.state, task, reason: task.reason }
  }
  if (state === 'failed') {
    const reason = job.failedReason ?? ''
    // Lost with its worker: it ran, and its final record is the queue's (its worker cannot give one).
    // Refused by the worker (a bad request): no record, the reason says why.
    if (reason.startsWith(LOST_PREFIX)) {
      const lost: ClusterTask = { ...known, state: 'lost', task: null, reason: reason.slice(LOST_PREFIX.length) }
      return { ...lost, task: recordOfJob(id, job, lost) }
    }
    return { ...known, state: 'failed', task: null, reason: reason || null }
  }
  if (state === 'active') return { ...known, state: progress?.state ?? 'queued', task: null, reason: null }
  // Waiting for a worker to take it (again, when the one that had it stopped answering: the worker that takes it judges that attempt).
  return { ...known, state: 'queued', worker: null, task: null, reason: null }
}

/**
 * The task record a job stands for when no worker has the task's own: queued (no worker took it
 * yet), running (as its worker last reported it, when the worker itself cannot be asked), or the
 * final record of a job that failed (lost with its worker, or a start request a worker refused).
 * What only a worker knows (its spool folder, its default sandbox and output cap) is empty or the
 * request's own.
 */
export function recordOfJob(id: string, job: ClusterJob, where: ClusterTask): Task {
  const base = baseOfRequest(id, job.data, job.data.submittedAt)
  const progress = progressOf(job)
  const startedAt = job.processedOn ? new Date(job.processedOn).toISOString() : job.data.submittedAt
  const endedAt = new Date(job.finishedOn ?? Date.now()).toISOString()
  const reason = where.reason ?? 'its worker gave no reason'
  const none = { exitCode: null, signal: null, stoppedBy: null } as const
  if (where.state === 'lost') return { ...base, ...none, state: 'lost', startedAt, pid: progress?.pid ?? 0, endedAt, reason }
  if (where.state === 'failed') return { ...base, ...none, state: 'failed', startedAt: null, pid: null, endedAt, reason }
  if (where.state === 'running' && progress?.pid) return { ...base, ...none, state: 'running', startedAt, pid: progress.pid, endedAt: null, reason: null }
  return { ...base, ...none, state: 'queued', startedAt: null, pid: null, endedAt: null, reason: null }
}

/** The final record of a task killed before any worker took it (its job is gone; this stays). */
export function killedWhileQueuedRecord(id: string, job: ClusterJob, stoppedBy: RequestedStop, note: string | undefined): Task {
  const base = baseOfRequest(id, job.data, job.data.submittedAt)
  const reason = note ? `${KILLED_WHILE_QUEUED_REASON}: ${note}` : KILLED_WHILE_QUEUED_REASON
  return { ...base, state: 'killed', startedAt: null, pid: null, endedAt: new Date().toISOString(), exitCode: null, signal: null, reason, stoppedBy }
}

export const KILLED_WHILE_QUEUED_REASON = 'killed before a worker took it'

/** A task's name and command as its job's start request gives them: what a list shows before any worker has its record. */
export function nameAndCommand(data: ClusterJobData): Pick<Task, 'name' | 'command' | 'shell'> {
  const { name, command, shell } = baseOfRequest('', data, data.submittedAt)
  return { name, command, shell }
}

/**
 * The fields of a record, from a job's start request. A request read from Redis may be anything
 * (a worker refuses a bad one and fails its job): what does not have its type is left empty.
 */
function baseOfRequest(id: string, data: ClusterJobData, submittedAt: string): TaskBase {
  const given = data.request as unknown
  const request = (typeof given === 'object' && given !== null ? given : {}) as Partial<StartTaskBody>
  // The values travel sealed; their names are in the clear.
  const sealedKeys = Array.isArray(data.sealedEnv?.keys) ? data.sealedEnv.keys.filter((key) => typeof key === 'string') : []
  const argv = Array.isArray(request.command) ? request.command.filter((each) => typeof each === 'string') : []
  const line = request.shell === true
  const tty =
    request.tty === true
      ? { ...DEFAULT_TERMINAL_SIZE }
      : typeof request.tty === 'object' && request.tty !== null
        ? { ...DEFAULT_TERMINAL_SIZE, ...request.tty }
        : null
  return {
    id,
    name: typeof request.name === 'string' ? request.name : null,
    owner: typeof request.owner === 'string' ? request.owner : DEFAULT_OWNER,
    command: line ? ['sh', '-c', argv[0] ?? ''] : argv,
    shell: line,
    cwd: typeof request.cwd === 'string' ? request.cwd : '',
    envKeys: typeof request.env === 'object' && request.env !== null ? Object.keys(request.env) : sealedKeys,
    timeoutMs: request.timeoutMs ?? null,
    // 0: the cap is the worker's own default, known once a worker has the task.
    maxOutputBytes: request.maxOutputBytes ?? 0,
    outputBytes: 0,
    lifetime: request.lifetime ?? DEFAULT_LIFETIME,
    stdin: tty ? 'pipe' : (request.stdin ?? 'null'),
    tty,
    sandbox: request.sandbox ?? 'workspace',
    network: (request.sandbox ?? 'workspace') === 'off' ? 'host' : networkModeOf(request.network ?? DEFAULT_NETWORK),
    writablePaths: request.writablePaths ?? [],
    memoryBytes: request.memoryBytes ?? null,
    pidsMax: request.pidsMax ?? null,
    createdAt: submittedAt,
    // The spool folder is on the worker's machine, made when a worker takes the task.
    spool: '',
  }
}

/** Any writer of Redis may set a job's progress: its worker only as a worker's name may be (ps shows it; reads go to it). */
function reportedWorker(progress: ClusterProgress | null): string | null {
  const worker = progress?.worker
  return isWorkerName(worker) ? worker : null
}

function progressOf(job: ClusterJob): ClusterProgress | null {
  return typeof job.progress === 'object' && job.progress !== null ? (job.progress as unknown as ClusterProgress) : null
}
