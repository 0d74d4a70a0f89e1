import type { Job } from 'bullmq'
import {
  isFinished,
  LOST_PREFIX,
  MAX_CLUSTER_RETRIES,
  TendError,
  type ClusterAttempt,
  type ClusterJobData,
  type ClusterProgress,
  type Task,
  type WorkerEntry,
} from '../../protocol/index.js'
import { CLUSTER_KEY_HOWTO, unsealEnv } from '../../protocol/sealed-env.js'
import { StartTaskBody } from '../../protocol/schemas.js'
import { compileValidator } from '../precompiled/schema-code.js'
import type { JobDeps } from './worker-deps.js'
import { stillHeld, watchJobLock, type JobLock } from './job-lock.js'
import { writeLease } from '../spawn/keeper-lease.js'
import type { ClusterKills } from './cluster-kills.js'
import { logClusterChange } from '../http/audit.js'

/** How long a job's wait for its task's end is, at most, between looks (the end is announced; this is a bound). */
const FINISH_WAIT_MS = 60_000

/** How long the look at an earlier worker may take before it counts as gone. */
const EARLIER_WORKER_TIMEOUT_MS = 5000

/** A worker's announcement in the cluster, or null. */
export type Registry = (name: string) => Promise<WorkerEntry | null>

export interface JobRunner {
  /** What a job uses of this worker's daemon. */
  daemon: JobDeps
  /** This worker's name. */
  worker: string
  registry: Registry
  /** What watching a job's lock needs besides the lock's key: a connection, and the lock's life. */
  lock: JobLock
  /** Kills heard before their task was admitted here. */
  kills: Pick<ClusterKills, 'takeEarly'>
  /** The cluster key, which opens the environment values jobs carry sealed; null: none here. */
  key: Buffer | null
  /** The cluster's base queue (for the audit log). */
  queue: string
}

/** An earlier attempt, judged: it ended (its record is the job's), or it was lost with its worker. */
export type Verdict = { ended: Task } | { lost: string }

/**
 * Runs one job: its task, admitted with the job's id as its id (the same id everywhere) and run
 * like any local task; the job completes with the task's final record once it has ended, whatever
 * its exit. A job taken before by a worker whose lock expired is judged first: the task may still
 * run there, and is never started beside it. If that attempt was lost and the task may be retried,
 * it runs again here as the next attempt; otherwise the job ends with that attempt's end, or lost.
 */
export async function runJob(runner: JobRunner, job: Job<ClusterJobData>, token: string | undefined): Promise<Task> {
  const { daemon, worker } = runner
  const { UnrecoverableError } = await import('bullmq')
  const id = job.id!
  // A stopping daemon's worker can still be handed a job (a fetch already waiting in Redis): it
  // puts it back for another worker.
  if (!daemon.supervisor.admitting && token) return putBack(job, token)
  // Whoever can write to the cluster's Redis can put a job there: its request is checked as the
  // socket checks a POST /v1/tasks body, its profile against what this worker's operator allows,
  // and a bad one fails its job, naming what is wrong.
  const problems = checkJob(job.data)
  if (problems.length > 0) return refuse(runner, job, `the task's start request is not valid: ${problems.join('; ')}`, 'TEND_ERR_VALIDATION')
  const profile = (job.data.request.sandbox as StartTaskBody['sandbox']) ?? daemon.config.sandbox
  if (!daemon.config.clusterAllowSandbox.includes(profile)) {
    return refuse(
      runner,
      job,
      new TendError('TEND_ERR_SANDBOX_NOT_ALLOWED', { profile, worker, allowed: daemon.config.clusterAllowSandbox.join(', ') }).message,
      'TEND_ERR_SANDBOX_NOT_ALLOWED',
    )
  }
  let env: Record<string, string> | undefined
  try {
    env = openEnv(runner, id, job.data)
  } catch (error) {
    return refuse(runner, job, (error as Error).message, (error as TendError).code ?? 'TEND_ERR_CLUSTER_KEY')
  }
  const request = { ...(job.data.request as unknown as StartTaskBody), ...(env ? { env } : {}) }
  const retries = job.data.retries ?? 0
  const progress = typeof job.progress === 'object' && job.progress !== null ? (job.progress as unknown as ClusterProgress) : null
  let attempt = progress?.attempt ?? 1
  const earlier: ClusterAttempt[] = [...(progress?.earlier ?? [])]
  // Taken before: a worker reports on a job once it has admitted its task. Its lock expired: that
  // worker died or lost Redis, or this one was restarted.
  if (progress) {
    const verdict = progress.worker === worker ? await judgeHere(daemon, id, worker) : await judgeElsewhere(id, progress.worker, runner.registry)
    if ('ended' in verdict || attempt > retries) await forgetEnv(job)
    if ('ended' in verdict) return verdict.ended
    if (attempt > retries) throw new UnrecoverableError(`${LOST_PREFIX}${verdict.lost}`)
    earlier.push({ attempt, worker: progress.worker, reason: verdict.lost })
    attempt += 1
    // The lost attempt ran here: its record gives way to the next attempt's (its end is in `earlier`).
    if (daemon.store.find(id)) await daemon.cleanup.remove(id)
  }
  // Taken for the last attempt it may have: its environment values leave Redis now. (A task that
  // may run again elsewhere keeps them, sealed, until its job ends.)
  if (attempt > retries) await forgetEnv(job)
  logClusterChange(daemon.log, {
    queue: runner.queue,
    channel: 'jobs',
    action: attempt === 1 ? 'start' : `start attempt ${attempt}`,
    taskId: id,
    outcome: 'admitted',
  })
  const lockKey = `${job.queueQualifiedName}:${id}:lock`
  for (;;) {
    const task = await runAttempt(runner, job, token, { request, retries, attempt, earlier, lockKey })
    const lost = lostAttempt(task)
    // A worker stopped by its operator (tend stop) ends its tasks with it, as every daemon does:
    // the job ends with that record. (A restart hands the job to the next daemon, which retries.)
    if (lost === null || attempt > retries || !token || !daemon.supervisor.admitting) {
      await forgetEnv(job)
      return task
    }
    // Stopped for its lease: the next attempt runs here if the job is still this worker's (Redis
    // came back in time); otherwise the worker that takes the job judges this attempt and runs it.
    if (!(await stillHeld(runner.lock, lockKey, token)))
      throw new Error(`the lease on the job was lost: the worker that takes it next judges attempt ${attempt}`)
    earlier.push({ attempt, worker, reason: lost })
    attempt += 1
    await daemon.cleanup.remove(id)
  }
}

/** One attempt: the task admitted and run here, the job's progress reported; answers its final record. */
async function runAttempt(
  runner: JobRunner,
  job: Job<ClusterJobData>,
  token: string | undefined,
  { request, retries, attempt, earlier, lockKey }: { request: StartTaskBody; retries: number; attempt: number; earlier: ClusterAttempt[]; lockKey: string },
): Promise<Task> {
  const { daemon, worker } = runner
  const id = job.id!
  const report = (task: Task) => job.updateProgress({ worker, state: task.state, pid: task.pid, attempt, earlier } satisfies ClusterProgress)
  const retried = retries > 0 && token !== undefined
  const task = await daemon.supervisor.start(request, {
    id,
    idempotencyKey: attempt === 1 ? `cluster-${id}` : `cluster-${id}-${attempt}`,
    // A task that may run again elsewhere must never outlive this daemon, nor its lease on the job:
    // its keeper holds it to a lease this worker renews while Redis confirms the job's lock (the
    // first one is a conservative half of the lock's life: the lock was taken a moment ago).
    ...(retried ? { endsWithDaemon: true, leaseMs: runner.lock.lockMs / 2 } : {}),
  })
  await report(task)
  // Killed while this worker was taking the job: stopped as soon as it exists.
  await runner.kills.takeEarly(id)
  const stopWatch = retried
    ? watchJobLock({
        ...runner.lock,
        lockKey,
        token,
        onLost: (why) => void fence(daemon, id, why),
        onConfirmed: (until) =>
          void writeLease(task.spool, until - Date.now()).catch((error: unknown) => daemon.log.warn({ err: error, taskId: id }, 'lease not renewed')),
      })
    : undefined
  try {
    const started = await daemon.store.whenState(id, (each) => each.state !== 'queued', FINISH_WAIT_MS)
    if (!isFinished(started)) await report(started)
    let current = started
    while (!isFinished(current)) current = await daemon.store.whenFinished(id, FINISH_WAIT_MS)
    return current
  } finally {
    stopWatch?.()
  }
}

/** Puts the job back on its queue, as it is, for the next worker that takes it (BullMQ's WaitingError). */
async function putBack(job: Job<ClusterJobData>, token: string): Promise<never> {
  const { WaitingError } = await import('bullmq')
  await job.moveToWait(token)
  throw new WaitingError()
}

/** Fails a job for good, with a reason its submitter sees; nothing was started. */
async function refuse(runner: JobRunner, job: Job<ClusterJobData>, reason: string, code: string): Promise<never> {
  const { UnrecoverableError } = await import('bullmq')
  logClusterChange(runner.daemon.log, { queue: runner.queue, channel: 'jobs', action: 'start', taskId: job.id!, outcome: code })
  await forgetEnv(job)
  throw new UnrecoverableError(reason)
}

/** The job's environment values, opened with the cluster key; none in the clear is taken. */
function openEnv(runner: JobRunner, id: string, data: ClusterJobData): Record<string, string> | undefined {
  if (data.request.env !== undefined) {
    throw new TendError('TEND_ERR_CLUSTER_KEY', {
      detail:
        `the job carries environment values in the clear, readable by whoever reads the queue: a submitter seals them with the cluster key (` +
        `${CLUSTER_KEY_HOWTO})`,
    })
  }
  if (data.sealedEnv === undefined) return undefined
  if (runner.key === null)
    throw new TendError('TEND_ERR_CLUSTER_KEY', {
      detail: `the job's environment values are sealed with the cluster key, and worker ${runner.worker} has none: ${CLUSTER_KEY_HOWTO}`,
    })
  return unsealEnv(data.sealedEnv, runner.key, id)
}

/** Deletes the job's sealed environment values from Redis. */
async function forgetEnv(job: Job<ClusterJobData>): Promise<void> {
  if (job.data.sealedEnv === undefined) return
  const { sealedEnv: _sealed, ...rest } = job.data
  await job.updateData(rest)
}

/** What is wrong with a job's data (nothing: an empty list). */
function checkJob(data: ClusterJobData): string[] {
  const validate = compileValidator('body', StartTaskBody)
  const problems = validate(data.request)
    ? []
    : (validate.errors ?? []).map((error) =>
        error.keyword === 'additionalProperties'
          ? `unknown field ${String(error.params.additionalProperty)}`
          : `${error.instancePath.slice(1) || 'request'} ${error.message}`,
      )
  const { retries } = data
  if (retries !== undefined && (!Number.isInteger(retries) || retries < 0 || retries > MAX_CLUSTER_RETRIES))
    problems.push(`retries must be a whole number from 0 to ${MAX_CLUSTER_RETRIES}, got ${JSON.stringify(retries)}`)
  return problems
}

/** Stops a task whose worker is about to lose its lease on the job: another may take it from then on. */
async function fence(daemon: JobDeps, id: string, why: string): Promise<void> {
  daemon.log.warn({ taskId: id, why }, 'lease on a cluster job lost: its task is stopped, so that a retry never runs beside it')
  try {
    await daemon.supervisor.kill(id, { signal: 'SIGKILL', graceMs: 0, note: `its worker lost its lease on the job (${why})`, stoppedBy: 'lease-expired' })
  } catch (error) {
    daemon.log.error({ err: error, taskId: id }, 'a task whose lease was lost could not be stopped')
  }
}

/**
 * An attempt is lost when it ended without running its course because its worker was lost: its
 * daemon ended under it (lost), stopped it (a restart: a daemon stopped for good completes its
 * jobs, so a job that comes back after a daemon-stop was left by a restart), or it was stopped
 * because the worker lost its lease on the job.
 */
function lostAttempt(task: Task): string | null {
  if (task.state === 'lost') return task.reason
  if (task.stoppedBy === 'lease-expired' || task.stoppedBy === 'daemon-stop') return task.reason
  return null
}

/** The attempt that ran on this worker, before this daemon (or its lease) was lost. */
async function judgeHere(daemon: JobDeps, id: string, worker: string): Promise<Verdict> {
  let task = daemon.store.find(id)
  if (!task) return { lost: `worker ${worker} ran the task before and no longer has its record` }
  // Still running (this daemon was restarted with it): it is the attempt, and its end is the job's.
  while (!isFinished(task)) task = await daemon.store.whenFinished(id, FINISH_WAIT_MS)
  const lost = lostAttempt(task)
  return lost === null ? { ended: task } : { lost }
}

/**
 * The attempt that ran on the worker that had the job before: its end, asked over that worker's
 * API (awaited while it still runs there), or lost when that worker does not answer.
 */
async function judgeElsewhere(id: string, earlier: string, registry: Registry): Promise<Verdict> {
  // A first look that does not wait: a worker that does not answer it (gone, or frozen) is judged at once.
  let seen = await lookAtEarlierAttempt(id, earlier, registry)
  while (seen === 'running') seen = await lookAtEarlierAttempt(id, earlier, registry, 25_000)
  return seen
}

/**
 * What the worker that had the job before says of the task: still running there (after waiting
 * up to waitMs for its end), its end, or nothing (it does not answer, or has no such task: lost).
 */
export async function lookAtEarlierAttempt(id: string, earlier: string, registry: Registry, waitMs = 0): Promise<Verdict | 'running'> {
  const entry = await registry(earlier)
  if (entry?.origin && entry.token) {
    const path = waitMs > 0 ? `/v1/tasks/${id}/wait?timeoutMs=${waitMs}` : `/v1/tasks/${id}`
    const answer = await fetch(`${entry.origin}${path}`, {
      headers: { authorization: `Bearer ${entry.token}` },
      signal: AbortSignal.timeout(EARLIER_WORKER_TIMEOUT_MS + waitMs),
    }).catch(() => null)
    if (answer?.ok) {
      const body = (await answer.json()) as Task | { task: Task }
      const task = 'task' in body ? body.task : body
      if (!isFinished(task)) return 'running'
      const lost = lostAttempt(task)
      return lost === null ? { ended: task } : { lost: `on worker ${earlier}: ${lost}` }
    }
  }
  return { lost: `worker ${earlier} stopped answering while it ran the task (its lock on the job expired), and the task cannot be found there` }
}
