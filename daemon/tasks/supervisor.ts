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
import type { Spawner } from '../spawn/spawner.js'
import type { SubmissionIndex } from '../store/submission-index.js'
import { admitTask, type StartOptions } from './admission/admit.js'
import { failQueuedAtStop } from './admission/queued-at-stop.js'
import { Scheduler } from './admission/scheduler.js'
import { Submissions } from './admission/submissions.js'
import { WaitingRuns } from './admission/waiting-runs.js'
import { HeldOutputs } from './output/held-outputs.js'
import type { PortWatch } from './ports/port-watch.js'
import { TaskPorts } from './ports/task-ports.js'
import { resumeRun } from './recovery/resume.js'
import { requestedStop, RESTART_STOPS_LIFELINE, withNote, type KillRequest } from './run/ending.js'
import { checkRunning, runningRuns, stopForDaemon } from './run/running-runs.js'
import { TaskRun } from './run/task-run.js'
import type { TaskRunContext } from './run/task-run-context.js'
import { createTaskRunContext, type SupervisorOptions } from './supervisor-options.js'
import { markCancelled } from './transitions.js'
import { LiveSampler } from './usage/live-sampler.js'

/** The daemon's tasks, one TaskRun each: starts, kills, resumes them, and stops them all at shutdown. */
export class Supervisor {
  /** The output.log of each running task, held open: readers and the cap go through it (held-outputs.ts). */
  readonly outputs = new HeldOutputs()
  /** Running tasks' live figures, sampled only when an answer asks (usage/live-sampler.ts). */
  private readonly liveSampler = new LiveSampler()
  /** Running tasks' listening sockets, `port: 'auto'`'s picks and a start's conflicts (task-ports.ts). */
  private readonly taskPorts: TaskPorts
  /** Every task from its admission until its final record lands. */
  private readonly runs = new Map<string, TaskRun>()
  private readonly scheduler: Scheduler
  private readonly submissions = new Submissions()
  /** Queued tasks waiting for others (`after`): they reach the scheduler once those have ended. */
  private readonly waiting: WaitingRuns
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
    this.context = createTaskRunContext(options, {
      outputs: this.outputs,
      daemon: this.daemon,
      forget: (run) => {
        if (this.runs.get(run.id) === run) this.runs.delete(run.id)
        this.liveSampler.forget(run.id)
      },
    })
    this.waiting = new WaitingRuns({ context: this.context, runs: this.runs, scheduler: this.scheduler, wakeReaders: (task) => this.wakeReaders(task) })
    this.taskPorts = new TaskPorts({
      store: options.store,
      log,
      networks: options.networks ?? null,
      perOwnerAutoPorts: config.perOwnerAutoPorts,
      processesOf: (id) => {
        const run = this.runs.get(id)
        return run?.running ? run.processes() : null
      },
    })
    this.checkTimer = setInterval(() => void checkRunning(this.runs.values()), config.outputCheckIntervalMs)
    this.checkTimer.unref()
  }

  /**
   * Admits a task: its spool folder and record exist when this resolves. With an idempotency key,
   * a retry of the same submission answers the first task instead of starting another. A start
   * asking for a port another running task of the owner listens on is answered with a warning.
   */
  async start(request: StartTaskBody, options: StartOptions = {}): Promise<StartedTask> {
    const task = await this.admit(request, options)
    const warnings = [...(task.warnings ?? []), ...(await this.taskPorts.conflictWarnings(task, request))]
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
        const { task, needs } = await admitTask({ ...this.context, autoPorts: this.taskPorts.auto }, request, submission, options)
        const run = new TaskRun(this.context, task.id, needs)
        this.runs.set(task.id, run)
        if (task.after) this.waiting.wait({ ...task, after: task.after })
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

  /** Running tasks' listening sockets, looked at when their records are served (port-watch.ts). */
  get ports(): PortWatch {
    return this.taskPorts.watch
  }

  /**
   * A running task's live figures, when they can be read (undefined for any other task). Samples at
   * most once a second per task (usage/live-sampler.ts).
   */
  liveUsageOf(task: Task): LiveUsage | undefined {
    return this.liveSampler.usageOf(task, (startedAtMs) => this.runs.get(task.id)?.sampled(startedAtMs))
  }

  /** Stops a task and resolves with its final record once no process of it is left. */
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
    const cancelled = failQueuedAtStop(store, this.runs, {
      reason,
      // Still waiting for its dependencies: it waits on under the next daemon (recovery).
      keeps: (id) => options.keepTasks === true && this.waiting.holds(id),
      wakeReaders: (task) => this.wakeReaders(task),
    })
    await Promise.all([...this.runs.values()].map((run) => run.launching))
    if (options.keepTasks) {
      // A task that is to end with this daemon would end as it leaves: stopped first, and recorded so.
      const endingWithIt = runningRuns(this.runs.values()).filter((run) => run.endsWithDaemon)
      await stopForDaemon(endingWithIt, RESTART_STOPS_LIFELINE, this.config.killGraceMs)
      // The others run on under their keepers; this daemon only lets go of them.
      this.daemon.keepingTasks = true
      for (const run of runningRuns(this.runs.values())) run.disarmTimeout()
      await Promise.allSettled(cancelled)
      await this.spawner.close()
      await this.scheduler.idle()
      await store.flush()
      return
    }
    await stopForDaemon(runningRuns(this.runs.values()), reason, this.config.killGraceMs)
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
  rewait(task: QueuedTask): Promise<void> {
    return this.waiting.rewait(task)
  }

  private wakeReaders(task: Task): void {
    if (isFinished(task)) this.context.outputWatch.wakeAll(task.id)
  }
}

function noop(): void {}
