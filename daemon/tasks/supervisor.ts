import { readFileSync } from 'node:fs'
import type { Logger } from 'pino'
import {
  DEFAULT_OWNER,
  isFinished,
  TendError,
  type LiveUsage,
  type QueuedTask,
  type RunningTask,
  type StartedTask,
  type StartTaskBody,
  type Task,
} from '../../protocol/index.js'
import type { DaemonConfig } from '../config.js'
import type { OwnerNetworks } from '../network/owner-networks.js'
import { cachedProtectedView, type DaemonHomes, type SandboxCapabilities } from '../sandbox/index.js'
import type { Spawner } from '../spawn/spawner.js'
import type { SubmissionIndex } from '../store/submission-index.js'
import type { TaskStore } from '../store/task-store.js'
import { admitTask, type StartOptions } from './admission/admit.js'
import { DependencyGate } from './admission/dependencies.js'
import { waitAgain } from './admission/wait-again.js'
import { requestedStop, RESTART_STOPS_LIFELINE, withNote, type KillRequest } from './run/ending.js'
import { HeldOutputs } from './output/held-outputs.js'
import { LiveSampler } from './usage/live-sampler.js'
import type { OutputWatch } from './output/output-watch.js'
import { resumeRun } from './recovery/resume.js'
import { Scheduler } from './admission/scheduler.js'
import { Submissions } from './admission/submissions.js'
import { TaskRun } from './run/task-run.js'
import type { TaskRunContext } from './run/task-run-context.js'
import { markCancelled, markFailed } from './transitions.js'
import { PortWatch } from './ports/port-watch.js'
import { PortAllocator } from './ports/auto-port.js'
import { portConflictWarnings } from './ports/port-conflicts.js'

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

/** The daemon's tasks, one TaskRun each: starts, kills, resumes them, and stops them all at shutdown. */
export class Supervisor {
  /** The output.log of each running task, held open: readers and the cap go through it (held-outputs.ts). */
  readonly outputs = new HeldOutputs()
  /** Running tasks' live figures, sampled only when an answer asks (usage/live-sampler.ts). */
  private readonly liveSampler = new LiveSampler()
  /** Running tasks' listening sockets, looked at when their records are served (port-watch.ts). */
  readonly ports: PortWatch
  /** `port: 'auto'`'s ports: held by the records of tasks not ended yet (auto-port.ts). */
  private readonly autoPorts: PortAllocator
  /** Every task from its admission until its final record lands. */
  private readonly runs = new Map<string, TaskRun>()
  private readonly scheduler: Scheduler
  private readonly submissions = new Submissions()
  /** Queued tasks waiting for others (`after`): they reach the scheduler once those have ended. */
  private readonly dependencies: DependencyGate
  private readonly checkTimer: NodeJS.Timeout
  /** accepting: false once the daemon is stopping; keepingTasks: set while it leaves its running tasks to the next one. */
  private readonly daemon = { accepting: true, keepingTasks: false }
  private readonly context: TaskRunContext
  private readonly config: Readonly<DaemonConfig>
  private readonly spawner: Spawner

  constructor(options: SupervisorOptions) {
    const { config, log, spawner } = options
    this.config = config
    this.spawner = spawner
    this.scheduler = new Scheduler(config.concurrency, config.perOwnerConcurrency, (error, owner) => log.error({ err: error, owner }, 'a task job failed'))
    this.context = {
      config,
      store: options.store,
      log,
      spawner,
      capabilities: options.capabilities,
      networks: options.networks ?? null,
      outputs: this.outputs,
      outputWatch: options.outputWatch,
      protectedView: cachedProtectedView(config, options.daemonHomes ?? { homes: () => [], registries: () => [] }),
      bootId: readBootId(),
      beforeEnding: options.beforeEnding ?? (() => Promise.resolve()),
      daemon: this.daemon,
      forget: (run) => {
        if (this.runs.get(run.id) === run) this.runs.delete(run.id)
        this.liveSampler.forget(run.id)
      },
    }
    this.dependencies = new DependencyGate({
      find: (id) => options.store.find(id),
      subscribe: (listener) => options.store.subscribe(listener),
      release: (id) => this.release(id),
      fail: (id, reason) => void this.failWaiting(id, reason),
      dropped: (id) => this.dropRun(id),
    })
    this.ports = new PortWatch({
      store: options.store,
      log,
      processesOf: (id) => {
        const run = this.runs.get(id)
        return run?.running ? run.processes() : null
      },
    })
    const { store } = options
    this.autoPorts = new PortAllocator({
      tasks: { list: () => store.list(), subscribe: (listener) => store.subscribe(listener) },
      namespaceProcessOf: (owner) => options.networks?.networkOf(owner)?.pid ?? null,
      perOwner: config.perOwnerAutoPorts,
    })
    this.checkTimer = setInterval(() => void this.checkOutputs(), config.outputCheckIntervalMs)
    this.checkTimer.unref()
  }

  /**
   * Admits a task: its spool folder and record exist when this resolves. With an idempotency key,
   * a retry of the same submission answers the first task instead of starting another. A start
   * asking for a port another running task of the owner listens on is answered with a warning.
   */
  async start(request: StartTaskBody, options: StartOptions = {}): Promise<StartedTask> {
    const task = await this.admit(request, options)
    const warnings = [...(task.warnings ?? []), ...(await portConflictWarnings(task, request, { store: this.context.store, ports: this.ports }))]
    // A copy: the store's record keeps only its own (task.warnings), never a port's.
    return warnings.length === 0 ? task : Object.assign({}, task, { warnings })
  }

  private admit(request: StartTaskBody, options: StartOptions): Promise<Task> {
    const { store } = this.context
    return this.submissions.admit(
      options.idempotencyKey,
      request.owner ?? DEFAULT_OWNER,
      request,
      (id) => store.find(id),
      async (submission) => {
        if (!this.daemon.accepting) throw new TendError('TEND_ERR_SHUTTING_DOWN', { detail: 'no new tasks are accepted' })
        const { task, needs } = await admitTask({ ...this.context, autoPorts: this.autoPorts }, request, submission, options)
        const run = new TaskRun(this.context, task.id, needs)
        this.runs.set(task.id, run)
        if (task.after) this.dependencies.wait({ ...task, after: task.after })
        else this.scheduler.submit(task.owner, () => run.run())
        return task
      },
    )
  }

  /** Relearns the idempotency keys of tasks loaded from the spool, and of those removed (the index). */
  rememberSubmissions(tasks: readonly Task[], removed: SubmissionIndex): void {
    this.submissions.remember(tasks, removed)
  }

  /** False once the daemon is stopping: no task is admitted any more. */
  get admitting(): boolean {
    return this.daemon.accepting
  }

  get spawnerKind(): Spawner['kind'] {
    return this.spawner.kind
  }

  /** Whether this daemon's tasks can outlive it (each has a keeper): what stop --keep-tasks needs. */
  get tasksOutliveDaemon(): boolean {
    return this.spawner.kind === 'native'
  }

  /** Stops a task and resolves with its final record once no process of it is left. */
  /**
   * A running task's live figures, when they can be read (undefined for any other task). Samples at
   * most once a second per task (usage/live-sampler.ts).
   */
  liveUsageOf(task: Task): LiveUsage | undefined {
    if (task.state !== 'running' || task.startedAt === null) return undefined
    const fresh = this.liveSampler.fresh(task.id)
    if (fresh) return fresh
    const sampled = this.runs.get(task.id)?.sampled(Date.parse(task.startedAt))
    return sampled ? this.liveSampler.sample(sampled) : undefined
  }

  async kill(id: string, request: KillRequest = {}): Promise<Task> {
    const { store } = this.context
    // A task being launched is stopped as the running task it is about to be: recording it as
    // killed before it started would rewrite what it did meanwhile.
    for (let launching = this.runs.get(id)?.launching; launching; launching = this.runs.get(id)?.launching) await launching
    const task = store.current(id)
    const stoppedBy = request.stoppedBy ?? 'operator'
    if (task.state === 'queued') {
      // The same synchronous step finds it queued and records it cancelled: a launch can no longer begin.
      this.runs.get(id)?.dropLaunch()
      const cancelled = await store.transition(id, (current) =>
        current.state === 'queued' ? markCancelled(current, withNote('killed before it started', request.note), new Date(), stoppedBy) : null,
      )
      this.wakeReaders(cancelled)
      return cancelled
    }
    const run = this.runs.get(id)
    if (!run?.running) {
      // Finished already: answered once its last version is on disk.
      await store.settled(id)
      return store.get(id)
    }
    run.stop(requestedStop(request, this.config.killGraceMs))
    return run.finished.promise
  }

  /**
   * Refuses new tasks, fails queued ones and stops running ones; resolves when all are recorded.
   * With keepTasks, running tasks are left to their keepers for the next daemon to supervise.
   */
  async shutdown(options: { reason?: string; keepTasks?: boolean } = {}): Promise<void> {
    const { store } = this.context
    const reason = options.reason ?? 'daemon stopped'
    this.daemon.accepting = false
    clearInterval(this.checkTimer)
    // Queued tasks that are not being launched never start: recorded failed in one synchronous
    // pass, so no launch can begin after it. Tasks being launched are stopped once they run.
    const now = new Date()
    const cancelled: Array<Promise<void>> = []
    for (const task of store.list()) {
      const run = this.runs.get(task.id)
      if (task.state !== 'queued' || run?.launching) continue
      // Still waiting for its dependencies: it waits on under the next daemon (recovery).
      if (options.keepTasks && this.dependencies.holds(task.id)) continue
      run?.dropLaunch()
      const failed = store.transition(task.id, (current) =>
        current.state === 'queued' ? markFailed(current, `${reason} before the task started`, now, 'daemon-stop') : null,
      )
      cancelled.push(failed.then((ended) => this.wakeReaders(ended)))
    }
    await Promise.all([...this.runs.values()].map((run) => run.launching))
    if (options.keepTasks) {
      // A task that is to end with this daemon would end as it leaves: stopped first, and recorded so.
      await this.stopAll(
        this.running().filter((run) => run.endsWithDaemon),
        RESTART_STOPS_LIFELINE,
      )
      // The others run on under their keepers; this daemon only lets go of them.
      this.daemon.keepingTasks = true
      for (const run of this.running()) run.disarmTimeout()
      await Promise.allSettled(cancelled)
      await this.spawner.close()
      await this.scheduler.idle()
      await store.flush()
      return
    }
    await this.stopAll(this.running(), reason)
    await Promise.allSettled(cancelled)
    // The spawner must outlive every job, so it closes once they are all done.
    await this.scheduler.idle()
    await store.flush()
    await this.spawner.close()
  }

  /**
   * Supervises again a task an earlier daemon started, still running under its keeper (resume.ts);
   * false when its keeper cannot be attached to.
   */
  async resume(task: RunningTask): Promise<boolean> {
    const run = new TaskRun(this.context, task.id, null)
    this.runs.set(task.id, run)
    if (!(await resumeRun(run, task, this.context))) {
      this.context.forget(run)
      return false
    }
    // It holds a slot like any running task, once one is free (it runs either way).
    this.scheduler.submit(task.owner, () => run.finished.promise.then(noop, noop))
    return true
  }

  /**
   * Holds again a task an earlier daemon left waiting for its dependencies (recovery.ts): judged at
   * once on those that ended meanwhile. Its environment's values were never stored, so a task that
   * had any cannot start as asked: it fails, saying so.
   */
  async rewait(task: QueuedTask): Promise<void> {
    const waiting = await waitAgain(this.context, task)
    if ('fail' in waiting) {
      await this.failWaiting(task.id, waiting.fail)
      return
    }
    this.runs.set(task.id, new TaskRun(this.context, task.id, waiting.needs))
    this.dependencies.wait({ ...task, after: waiting.after })
  }

  /** A waiting task's dependencies are done with: it takes its turn in the queue like any task. */
  private release(id: string): void {
    const run = this.runs.get(id)
    const task = this.context.store.findCurrent(id)
    if (!run || task?.state !== 'queued') return
    this.scheduler.submit(task.owner, () => run.run())
  }

  /** A waiting task that can never start: recorded failed, its run let go of. */
  private async failWaiting(id: string, reason: string): Promise<void> {
    this.dropRun(id)
    const failed = await this.context.store.transition(id, (current) => (current.state === 'queued' ? markFailed(current, reason, new Date()) : null))
    this.context.log.info({ taskId: id, reason }, 'task failed to start')
    this.wakeReaders(failed)
  }

  /** A queued task that will never launch: its run is let go of (a waiting one never reached the scheduler, which would). */
  private dropRun(id: string): void {
    const run = this.runs.get(id)
    if (!run) return
    run.dropLaunch()
    this.context.forget(run)
  }

  /** Stops these tasks for the daemon's stop; resolves once each is recorded. */
  private async stopAll(runs: TaskRun[], reason: string): Promise<void> {
    await Promise.all(
      runs.map((run) => {
        run.stop({ state: 'killed', stoppedBy: 'daemon-stop', reason, signal: 'SIGTERM', graceMs: this.config.killGraceMs })
        return run.finished.promise.catch(() => undefined)
      }),
    )
  }

  private running(): TaskRun[] {
    return [...this.runs.values()].filter((run) => run.running)
  }

  private async checkOutputs(): Promise<void> {
    // Live: a run that ends meanwhile is not looked at any more.
    for (const run of this.runs.values()) {
      if (!run.running) continue
      run.checkLeader()
      await run.checkOutput()
    }
  }

  private wakeReaders(task: Task): void {
    if (isFinished(task)) this.context.outputWatch.wakeAll(task.id)
  }
}

/** This boot's id: a task recorded in another boot cannot still be running. */
export function readBootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
  } catch {
    return 'unknown'
  }
}

function noop(): void {}
