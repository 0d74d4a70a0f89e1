import { readFileSync } from 'node:fs'
import type { Logger } from 'pino'
import { constants } from 'node:os'
import {
  DEFAULT_LIFETIME,
  DEFAULT_OWNER,
  formatDuration,
  isFinished,
  isTaskId,
  TendError,
  type RunningTask,
  type StartTaskBody,
  type StoppedBy,
  type Task,
} from '../../protocol/index.js'
import { exitPath, heldFootprint, heldFootprintSync, outputFootprint, outputFootprintSync, outputPath, taskDir, truncateRegularFile } from '../../spool/index.js'
import { HeldOutputs } from './held-outputs.js'
import { holdsDiskPastEnd, outputOverCap } from './output-cap.js'
import type { DaemonConfig } from '../config.js'
import { killLeftovers, killMembers, killTree, leaderGone } from '../spawn/kill-tree.js'
import { isAliveIdentity, leaderIdentity, processState, type ProcessIdentity } from '../spawn/process-scan.js'
import { launchTask, type LaunchOutcome } from './launch.js'
import type { LaunchPlan } from '../sandbox/index.js'
import type { SpawnExit, Spawner } from '../spawn/spawner.js'
import type { OutputWatch } from './output-watch.js'
import { newTaskId } from '../../protocol/task-id.js'
import { Scheduler } from './scheduler.js'
import { setLongTimeout, type LongTimeout } from './long-timeout.js'
import { Submissions } from './submissions.js'
import type { SubmissionIndex } from '../store/submission-index.js'
import { SettleLater } from './settle-later.js'
import { exitOf, readTaskExitFile } from '../spawn/exit-file.js'
import { keeperWritten } from './keeper-exit.js'
import { answerUnreportedExit, makeRoomForResumedExit, spoolIsShort } from './unanswered-exit.js'
import { TaskCgroups } from '../sandbox/cgroups.js'
import type { OwnerNetworks } from '../network/owner-networks.js'
import { taskAllowList } from '../network/allowlist.js'
import type { TaskStore } from '../store/task-store.js'
import { cachedProtectedView, protectedSinceAdmission, resolveTaskPaths, type DaemonHomes, type ProtectedView, type SandboxCapabilities, type TaskPaths } from '../sandbox/index.js'
import { admissionIdentity, ownerIdsOf } from '../sandbox/task-identity.js'
import { createQueuedTask, markCancelled, markEnded, markFailed, markLost, markStarted, withOutputLoss } from './transitions.js'
import { DAEMON_ENDED_LIFELINE, decideEnding, LEASE_RAN_OUT, RESTART_STOPS_LIFELINE, signalName, SPAWNER_ENDED_LIFELINE, type Stopping } from './ending.js'
import { checkStartRequest } from './admission.js'
import { writeLease } from './lease-file.js'
import { newRunName, taskMarker } from '../spawn/run-name.js'



interface RunningEntry {
  pid: number
  /** Resolves when the leader has exited; rejects if the spawner that watched it died. */
  exited: Promise<SpawnExit>
  /** Set when tend itself stops the task: how the ending is to be recorded, and who asked. */
  stopping?: Stopping
  stopped?: Promise<void>
  /** The task's exact process list, when it has a cgroup. */
  members?: () => number[]
  /** The leader is bubblewrap around the command. */
  wrapped: boolean
  timeoutTimer?: LongTimeout
  /** The final record; rejects if supervision failed. */
  finished: SettleLater<Task>
  /** The spawner has reported the leader's exit. */
  exitKnown: boolean
  /** After a stop: whether its first signal reached a live process of the task (else it had ended by itself). */
  signalled?: boolean
  /** When the stop began: whether the leader caught or ignored its signal (else that signal would have ended it). */
  leaderHandles?: boolean
  /** This daemon started it to end with it (endsWithDaemon): a restart cannot hand it over. */
  endsWithDaemon?: boolean
  /**
   * The leader as its keeper started it (null: its pid was not the keeper's child when looked at);
   * absent without a keeper. Signals go to its pid only while that pid is still it (kill-tree.ts).
   */
  leader?: ProcessIdentity | null
  /** The task's keeper (absent without one): continued if found stopped while a stop waits for the exit. */
  keeper?: RunningTask['keeper']
  /** A watch for an exit its keeper does not report has begun (answerUnreportedExit). */
  answering?: boolean
}

/** A task whose process has started: what supervise() needs; `settle()` ends its launching. */
interface Launched {
  current: Task
  outcome: Extract<LaunchOutcome, { started: true }>
  endsWithDaemon: boolean
  settle: () => void
}

/** How a task is admitted besides its request: never part of an HTTP body. */
export interface StartOptions {
  /** A retry of the same submission with this key answers the first task. Default: none. */
  idempotencyKey?: string
  /** The request acts for an owner (an agent), not the operator: it may not widen the task's network (allowNet). Default: false. */
  actingForOwner?: boolean
  /** The id the task has everywhere (a cluster task), checked. Default: a new one. */
  id?: string
  /**
   * The task ends when this daemon ends, however it ends (SIGKILL included), instead of running on
   * for the next daemon: for a task that may be run again elsewhere (a cluster retry), which must
   * never run twice at once. A later daemon records it lost; a restart stops it first. Needs the
   * native spawner (under the node one the task fails, saying why). Default: false.
   */
  endsWithDaemon?: boolean
  /**
   * The task runs only while it holds a lease: its keeper ends it, on its own, once the lease runs
   * out (daemon/tasks/lease-file.ts). The first lease lasts this long from admission (in ms); who
   * started the task renews it with writeLease. Implies endsWithDaemon. Default: none.
   */
  leaseMs?: number
}

/** What a running task holds besides its processes: its cgroups, released once it has ended. */
type TaskResources = Pick<LaunchPlan, 'cgroups' | 'release'>

export interface KillRequest {
  signal?: NodeJS.Signals | number
  graceMs?: number
  /** The caller's words, appended to the recorded reason. */
  note?: string
  /**
   * Who asks: an agent (`owner`), its session's disposal (`session-end`), the cluster worker that
   * lost its lease on the task's job (`cluster-lease`), else the operator.
   */
  stoppedBy?: Extract<StoppedBy, 'owner' | 'operator' | 'session-end' | 'cluster-lease'>
}

/** Starts, watches and stops tasks; the only module that touches task processes. */
export class Supervisor {
  private readonly scheduler: Scheduler
  private readonly running = new Map<string, RunningEntry>()
  /** The output.log of each running task, held open: readers and the cap go through it (held-outputs.ts). */
  readonly outputs = new HeldOutputs()
  /** Tasks whose process is being started: settles once it is tracked, failed, or killed. */
  private readonly launching = new Map<string, Promise<void>>()
  /** What tasks not started yet need at launch: env values (never persisted) and the folders pinned at acceptance. */
  private readonly pending = new Map<string, { env: Record<string, string>; paths: TaskPaths; endsWithDaemon: boolean }>()
  private readonly checkTimer: NodeJS.Timeout
  private readonly submissions = new Submissions()
  private readonly bootId = readBootId()
  private accepting = true
  /** Set while the daemon leaves its running tasks to the next one. */
  private keepingTasks = false
  /** What sandboxed tasks may not be given and get masked: asked at each admission and launch. */
  private readonly protectedView: () => ProtectedView
  /** Runs before a started task's ending is recorded, which then carries what it did (the network ledger's flush). */
  beforeEnding: (id: string) => Promise<void> = () => Promise.resolve()

  constructor(
    private readonly config: Readonly<DaemonConfig>,
    private readonly store: TaskStore,
    private readonly outputWatch: OutputWatch,
    private readonly log: Logger,
    private readonly capabilities: SandboxCapabilities,
    private readonly spawner: Spawner,
    private readonly onTaskFinished: (task: Task) => void = () => {},
    daemonHomes: DaemonHomes = { homes: () => [], registries: () => [] },
    /** The owners' private networks (loopback and allow); null where none can be made. */
    private readonly networks: OwnerNetworks | null = null,
  ) {
    this.scheduler = new Scheduler(config.concurrency, config.perOwnerConcurrency, (error, owner) => this.log.error({ err: error, owner }, 'a task job failed'))
    this.protectedView = cachedProtectedView(config, daemonHomes)
    this.checkTimer = setInterval(() => void this.checkOutputs(), config.outputCheckIntervalMs)
    this.checkTimer.unref()
  }

  /**
   * Admits a task: its spool folder and record exist when this resolves. With an idempotency key,
   * a retry of the same submission answers the first task instead of starting another.
   */
  start(request: StartTaskBody, options: StartOptions = {}): Promise<Task> {
    return this.submissions.admit(options.idempotencyKey, request.owner ?? DEFAULT_OWNER, request, (id) => this.store.find(id), (submission) => this.admit(request, submission, options))
  }

  /** Relearns the idempotency keys of tasks loaded from the spool, and of those removed (the index). */
  rememberSubmissions(tasks: readonly Task[], removed: SubmissionIndex): void {
    this.submissions.remember(tasks, removed)
  }

  private async admit(request: StartTaskBody, submission: { idempotencyKey: string; requestHash: string } | null, options: StartOptions): Promise<Task> {
    const givenId = options.id
    if (!this.accepting) throw new TendError('TEND_ERR_SHUTTING_DOWN', { detail: 'no new tasks are accepted' })
    if (givenId !== undefined && !isTaskId(givenId)) throw new TendError('TEND_ERR_INVALID_TASK_ID', { id: givenId })
    const { sandbox, tty, limits, network, allowNet } = checkStartRequest(request, {
      defaultSandbox: this.config.sandbox,
      capabilities: this.capabilities,
      spawnerKind: this.spawner.kind,
      limitDefaults: this.config,
      actingForOwner: options.actingForOwner === true,
    })
    // A sandboxed task on its own identity reaches its folders as its owner's uid (given at the owner's first task).
    const own = sandbox === 'off' ? null : await ownerIdsOf(this.capabilities.identity, request.owner ?? DEFAULT_OWNER)
    // Decided on real paths, and pinned: the folders checked now are the folders the task gets.
    const paths = await resolveTaskPaths({
      profile: sandbox,
      cwd: request.cwd,
      writablePaths: request.writablePaths ?? [],
      configWritablePaths: this.config.writablePaths,
      // Only a sandbox refuses protected places; finding them (every live daemon's home, the secret paths) costs ~0.3 ms.
      protectedPlaces: sandbox === 'off' ? [] : this.protectedView().places,
      ...admissionIdentity(this.capabilities.identity, own && 'uid' in own ? own : null),
    })
    const id = givenId ?? newTaskId()
    const spool = taskDir(this.config.layout.spool, id)
    const env = request.env ?? {}
    const fields = {
      id,
      name: request.name ?? null,
      owner: request.owner ?? DEFAULT_OWNER,
      command: request.shell ? ['sh', '-c', request.command[0]!] : request.command,
      shell: request.shell ?? false,
      cwd: paths.cwd.path,
      envKeys: Object.keys(env),
      lifetime: request.lifetime ?? DEFAULT_LIFETIME,
      stdin: tty ? 'pipe' : (request.stdin ?? 'null'),
      tty,
      timeoutMs: request.timeoutMs ?? null,
      maxOutputBytes: request.maxOutputBytes ?? this.config.maxOutputBytes,
      outputBytes: 0,
      sandbox,
      network,
      ...(allowNet.length > 0 ? { allowNet } : {}),
      writablePaths: request.writablePaths ?? [],
      sandboxWritable: paths.writable.map((entry) => entry.path),
      memoryBytes: limits.memoryBytes,
      pidsMax: limits.pidsMax,
      createdAt: new Date().toISOString(),
      spool,
      run: newRunName(id),
    }
    // Named fields after a spread, not a spread after fields: see createQueuedTask.
    const task = createQueuedTask(submission ? { ...fields, idempotencyKey: submission.idempotencyKey, requestHash: submission.requestHash } : fields)
    // Recorded first: a task that cannot be written (disk full) is refused and leaves nothing.
    await this.store.create(task)
    // Before the task can start: its keeper finds the lease there from its first look.
    if (options.leaseMs !== undefined) await writeLease(spool, options.leaseMs)
    this.pending.set(id, { env, paths, endsWithDaemon: options.endsWithDaemon === true || options.leaseMs !== undefined })
    this.log.info({ taskId: id, owner: task.owner }, 'task queued')
    this.scheduler.submit(task.owner, () => this.run(id))
    return task
  }

  /** False once the daemon is stopping: no task is admitted any more. */
  get admitting(): boolean {
    return this.accepting
  }

  get spawnerKind(): Spawner['kind'] {
    return this.spawner.kind
  }

  /** Stops a task and resolves with its final record once no process of it is left. */
  async kill(id: string, request: KillRequest = {}): Promise<Task> {
    // A task being launched is stopped as the running task it is about to be: recording it as
    // killed before it started would rewrite what it did meanwhile.
    for (let launching = this.launching.get(id); launching; launching = this.launching.get(id)) await launching
    const task = this.store.current(id)
    const stoppedBy = request.stoppedBy ?? 'operator'
    if (task.state === 'queued') {
      // The same synchronous step finds it queued and records it cancelled: a launch can no longer begin.
      this.pending.delete(id)
      const cancelled = await this.store.transition(id, (current) => (current.state === 'queued' ? markCancelled(current, withNote('killed before it started', request.note), new Date(), stoppedBy) : null))
      this.finishTask(cancelled)
      return cancelled
    }
    const entry = this.running.get(id)
    if (!entry) {
      // Finished already: answered once its last version is on disk.
      await this.store.settled(id)
      return this.store.get(id)
    }
    this.stop(id, entry, {
      state: 'killed',
      stoppedBy,
      reason: withNote(`killed by request (${signalName(request.signal ?? 'SIGTERM')})`, request.note),
      signal: request.signal ?? 'SIGTERM',
      graceMs: request.graceMs ?? this.config.killGraceMs,
    })
    return entry.finished.promise
  }

  /**
   * Refuses new tasks, fails queued ones and stops running ones; resolves when all are recorded.
   * With keepTasks, running tasks are left to their keepers for the next daemon to supervise.
   */
  async shutdown(options: { reason?: string; keepTasks?: boolean } = {}): Promise<void> {
    const reason = options.reason ?? 'daemon stopped'
    this.accepting = false
    clearInterval(this.checkTimer)
    // Queued tasks that are not being launched never start: recorded failed in one synchronous
    // pass, so no launch can begin after it. Tasks being launched are stopped once they run.
    const now = new Date()
    const cancelled: Array<Promise<void>> = []
    for (const task of this.store.list()) {
      if (task.state !== 'queued' || this.launching.has(task.id)) continue
      this.pending.delete(task.id)
      const failed = this.store.transition(task.id, (current) => (current.state === 'queued' ? markFailed(current, `${reason} before the task started`, now, 'daemon-stop') : null))
      cancelled.push(failed.then((ended) => this.finishTask(ended)))
    }
    await Promise.all([...this.launching.values()])
    if (options.keepTasks) {
      // A task that is to end with this daemon would end as it leaves: stopped first, and recorded so.
      await this.stopAll([...this.running].filter(([, entry]) => entry.endsWithDaemon), RESTART_STOPS_LIFELINE)
      // The others run on under their keepers; this daemon only lets go of them.
      this.keepingTasks = true
      for (const entry of this.running.values()) entry.timeoutTimer?.clear()
      await Promise.allSettled(cancelled)
      await this.spawner.close()
      await this.scheduler.idle()
      await this.store.flush()
      return
    }
    await this.stopAll([...this.running], reason)
    await Promise.allSettled(cancelled)
    // The spawner must outlive every job, so it closes once they are all done.
    await this.scheduler.idle()
    await this.store.flush()
    await this.spawner.close()
  }

  /** Stops these tasks for the daemon's stop; resolves once each is recorded. */
  private async stopAll(entries: Array<[string, RunningEntry]>, reason: string): Promise<void> {
    await Promise.all(
      entries.map(([id, entry]) => {
        this.stop(id, entry, { state: 'killed', stoppedBy: 'daemon-stop', reason, signal: 'SIGTERM', graceMs: this.config.killGraceMs })
        return entry.finished.promise.catch(() => undefined)
      }),
    )
  }

  /** Whether this daemon's tasks can outlive it (each has a keeper): what stop --keep-tasks needs. */
  get tasksOutliveDaemon(): boolean {
    return this.spawner.kind === 'native'
  }

  /**
   * One task from its slot to its end: launch, watch, clean up; the slot frees when no process of
   * it is left. While the task runs, what waits for it is one promise reaction on its exit (see
   * watch()): nothing of its launch (plan, environment) stays reachable.
   */
  private run(id: string): Promise<void> {
    return this.launch(id).then((launched) => (launched ? this.supervise(id, launched) : undefined))
  }

  /** A task launched: tracked, recorded running, its timeout armed, its exit watched. */
  private supervise(id: string, launched: Launched): Promise<void> {
    const { current, outcome } = launched
    const { cgroups, release } = outcome.plan
    const resources: TaskResources = { cgroups, release }
    const entry = this.track(id, current, outcome.pid, outcome.exited, resources, outcome.keeper)
    entry.endsWithDaemon = launched.endsWithDaemon
    // Running from now on, in memory at once (a kill waiting on the launch then finds it running);
    // the record is written while the task runs: neither the task nor its slot waits for it.
    const { ranAs } = outcome.plan
    const startedSave = this.store.transition(id, (task) => markStarted(task, outcome.pid, new Date(), outcome.keeper, this.bootId, ranAs))
    startedSave.catch((error: unknown) => this.log.error({ taskId: id, err: error }, 'writing the running record failed'))
    launched.settle()
    this.armTimeout(id, entry, current.timeoutMs, Date.now())
    this.log.info({ taskId: id, pid: outcome.pid, uid: ranAs.uid }, 'task started')
    // A daemon-wide fallback is said once, at start; this one is this task's alone.
    if (ranAs.fallback && ranAs.fallback !== this.capabilities.identity.fallback) this.log.warn({ taskId: id, fallback: ranAs.fallback }, 'task runs as uid 0 (without capabilities), not on its own identity')
    return this.watch(id, entry, resources)
  }

  /**
   * A task an earlier daemon started, still running under its keeper: supervised again as if
   * nothing had happened (kill, timeout, output cap, events, wait), through the same tracking as a
   * launch. A timeout that came due meanwhile stops it now. Answers false when its keeper cannot
   * be attached to (then it is not this daemon's to watch).
   */
  async resume(task: RunningTask): Promise<boolean> {
    if (!task.keeper) return false
    const attached = await this.spawner.attach({ keeper: task.keeper, taskPid: task.pid, exitFile: exitPath(this.config.layout.spool, task.id) })
    if (!attached.attached) {
      this.log.warn({ taskId: task.id, code: attached.code, reason: attached.message }, 'the keeper of a running task could not be attached to')
      return false
    }
    // A kill under way when the last daemon died may have left a sandbox's monitor held (SIGSTOP,
    // see kill-tree.ts); nothing else stops it (the task cannot reach it): it goes on now.
    if (task.sandbox !== 'off' && processState(task.pid) === 'T' && leaderIdentity(task.pid, task.keeper.pid) !== null) {
      this.log.warn({ taskId: task.id, pid: task.pid }, 'the sandbox monitor of a resumed task was held by an interrupted kill; continuing it')
      try {
        process.kill(task.pid, 'SIGCONT')
      } catch {
        // Gone meanwhile: its keeper reports how it ended.
      }
    }
    // Its owner keeps the uid it runs on: no other owner is given it while it runs.
    const { identity } = this.capabilities
    if (identity.as === 'task' && task.ranAs?.identity === 'task') identity.owners.adopt(task.owner, task.ranAs.uid)
    const plan = await resumedPlan(task, this.capabilities, this.networks, this.config)
    // The file its keeper writes, whatever the task did to the name while no daemon ran.
    await this.outputs.holdFromKeeper(task.id, task.keeper.pid, outputPath(this.config.layout.spool, task.id)).catch((error: unknown) => this.log.warn({ taskId: task.id, err: error }, 'output.log cannot be held open: it is read by its path'))
    const entry = this.track(task.id, task, task.pid, attached.exited, plan, task.keeper)
    void this.watch(task.id, entry, plan)
    void makeRoomForResumedExit({
      exited: entry.exited,
      leader: entry.leader,
      spoolIsShort: () => spoolIsShort(this.config.layout.spool),
      releaseReserve: () => this.store.releaseReserve(),
      onReleased: () => this.log.warn({ taskId: task.id }, 'the spool reserve was given up: a task ended while no daemon ran, and its keeper could not write its exit file'),
    })
    // A deadline or an output cap passed while no daemon ran is enforced now.
    this.armTimeout(task.id, entry, task.timeoutMs, Date.parse(task.startedAt))
    await this.checkOutput(task.id, entry)
    this.log.info({ taskId: task.id, pid: task.pid, keeper: task.keeper.pid }, 'task supervised again')
    // It holds a slot like any running task, once one is free (it runs either way).
    this.scheduler.submit(task.owner, () => entry.finished.promise.then(
      () => undefined,
      () => undefined,
    ))
    return true
  }

  /** Tracks a running task: kills, stops and output checks find it from now on. */
  private track(id: string, current: Task, pid: number, exited: Promise<SpawnExit>, plan: TaskResources, keeper: RunningTask['keeper']): RunningEntry {
    const cgroups = plan.cgroups
    const entry: RunningEntry = {
      pid,
      // Read now, while the keeper (its parent, which reaps it) holds it: a daemon later frozen
      // past its end could otherwise take a reused pid for it.
      ...(keeper ? { leader: leaderIdentity(pid, keeper.pid), keeper } : {}),
      exited,
      // kill() and shutdown() await it; a supervision failure is logged in ended() either way.
      finished: new SettleLater<Task>(),
      members: cgroups ? () => cgroups.members() : undefined,
      wrapped: current.sandbox !== 'off',
      exitKnown: false,
    }
    this.running.set(id, entry)
    return entry
  }

  /** Stops the task at its deadline (counted from when it started); one already past stops it now. */
  private armTimeout(id: string, entry: RunningEntry, timeoutMs: number | null, startedAtMs: number): void {
    if (timeoutMs === null) return
    const stop = () => this.stop(id, entry, { state: 'timed_out', stoppedBy: 'timeout', reason: `timed out after ${formatDuration(timeoutMs)}`, signal: 'SIGTERM', graceMs: this.config.killGraceMs })
    entry.timeoutTimer = setLongTimeout(stop, Math.max(0, startedAtMs + timeoutMs - Date.now()))
  }

  /**
   * Waits for the task's end, then records it; resolves when no process of it is left (the slot
   * frees then). Called right after track(), so the exit is known (exitKnown) as soon as it is
   * reported.
   */
  private watch(id: string, entry: RunningEntry, plan: TaskResources): Promise<void> {
    return entry.exited.then(
      (exit) => {
        entry.exitKnown = true
        return this.ended(id, entry, plan, exit)
      },
      (error: unknown) => this.ended(id, entry, plan, error instanceof Error ? error : new Error(String(error))),
    )
  }

  /** The task's leader has exited, or its spawner lost it (an Error): its end is recorded. */
  private async ended(id: string, entry: RunningEntry, plan: TaskResources, exit: SpawnExit | Error): Promise<void> {
    let endedSave: Promise<Task>
    try {
      const result = exit instanceof Error ? this.exitAfterSpawnerLoss(id, entry, exit) : exit
      // The daemon is leaving its tasks to the next one (stop --keep-tasks, restart): not ended.
      if (result === 'kept') {
        void this.outputs.release(id)
        entry.finished.resolve(this.store.get(id))
        return
      }
      entry.timeoutTimer?.clear()
      endedSave = result instanceof Error ? this.spawnerLost(id, entry, plan, result) : (await this.afterExit(id, entry, this.store.current(id), plan, result)).saved
    } catch (error) {
      endedSave = Promise.reject(error)
    }
    // No process of the task is left: its slot frees now, and its final record lands on its own.
    void endedSave.then(
      (ended) => {
        this.log.info({ taskId: id, state: ended.state, exitCode: ended.exitCode, signal: ended.signal }, 'task ended')
        this.running.delete(id)
        void this.outputs.release(id)
        this.finishTask(ended)
        entry.finished.resolve(ended)
      },
      (error: unknown) => {
        this.running.delete(id)
        void this.outputs.release(id)
        this.log.error({ taskId: id, err: error }, 'task supervision failed')
        entry.finished.reject(error)
      },
    )
  }

  /**
   * How a task its spawner lost ended. A spawner whose helper dies attaches to the task's keeper again by itself;
   * when it gives up (or is closed because the daemon leaves its tasks running), the keeper may
   * still have recorded the exit. An Error only when nobody knows.
   */
  private exitAfterSpawnerLoss(id: string, entry: RunningEntry, result: Error): SpawnExit | Error | 'kept' {
    if (this.keepingTasks) return 'kept'
    const task = this.store.current(id)
    const recorded = task.state === 'running' && task.keeper ? readTaskExitFile(this.config.layout.spool, id) : null
    return recorded && recorded.pid === entry.pid ? exitOf(recorded) : result
  }

  /**
   * Starts a queued task's process. Answers null when there is nothing to watch: the task failed
   * to start (recorded here), or was killed or the daemon stopped meanwhile (recorded by them; its
   * tree is killed here). Otherwise `settle()` must be called once the task is tracked: a kill that
   * comes while the task is being launched waits for it (see kill()).
   */
  private async launch(id: string): Promise<Launched | null> {
    const task = this.store.findCurrent(id)
    if (!task || task.state !== 'queued') return null
    const pending = this.pending.get(id)
    this.pending.delete(id)
    if (!pending) {
      this.finishTask(await this.store.transition(id, (current) => markFailed(current, 'the task was accepted by an earlier daemon and never started', new Date())))
      return null
    }
    // Admitted while the daemon began to stop (after its pass over the queued tasks): it never
    // starts, or it would run on with nobody to stop it.
    if (!this.accepting) {
      this.finishTask(await this.store.transition(id, (current) => (current.state === 'queued' ? markFailed(current, 'daemon stopped before the task started', new Date(), 'daemon-stop') : null)))
      return null
    }
    // Checked again on what is protected now: it may have waited long enough for a home to appear in its cwd.
    const view = task.sandbox === 'off' ? null : this.protectedView()
    const protectedNow = view && protectedSinceAdmission(task.sandbox, pending.paths, view.places)
    if (protectedNow) {
      this.log.info({ taskId: id, reason: protectedNow }, 'task failed to start')
      this.finishTask(await this.store.transition(id, (current) => (current.state === 'queued' ? markFailed(current, protectedNow, new Date()) : null)))
      return null
    }
    let launchSettled!: () => void
    this.launching.set(id, new Promise<void>((resolve) => (launchSettled = resolve)))
    const settle = () => {
      this.launching.delete(id)
      launchSettled()
    }
    const outputFile = outputPath(this.config.layout.spool, id)
    // Held before the task can touch it: the file its keeper will open.
    await this.holdOutput(id, outputFile)
    // Whatever goes wrong on the way to a process is this task's failure, never the daemon's.
    const outcome = await launchTask({
      task,
      outputFile,
      exitFile: exitPath(this.config.layout.spool, id),
      envAdditions: pending.env,
      paths: pending.paths,
      endsWithDaemon: pending.endsWithDaemon,
      masks: view?.masks ?? [],
      config: this.config,
      capabilities: this.capabilities,
      spawner: this.spawner,
      networks: this.networks,
    }).catch((error: unknown): LaunchOutcome => {
      this.log.error({ taskId: id, err: error }, 'launching the task failed')
      return { started: false, reason: `could not start the task: ${(error as Error).message}` }
    })
    const current = this.store.current(id)
    if (current.state !== 'queued') {
      if (outcome.started) {
        await killTree({ taskId: id, marker: taskMarker(current), pid: outcome.pid, signal: 'SIGKILL', graceMs: 0, leaderExited: leaderGone(outcome.pid, outcome.exited) }).catch(
          (error: unknown) => this.log.error({ taskId: id, err: error }, 'task tree did not die'),
        )
        await outcome.plan.release()
      }
      await this.outputs.release(id)
      settle()
      return null
    }
    if (!outcome.started) {
      this.log.info({ taskId: id, reason: outcome.reason }, 'task failed to start')
      await this.outputs.release(id)
      settle()
      this.finishTask(await this.store.transition(id, (latest) => markFailed(latest, outcome.reason, new Date())))
      return null
    }
    return { current, outcome, endsWithDaemon: pending.endsWithDaemon, settle }
  }

  /**
   * The leader has exited: whatever it left behind goes, its limits are read and its output size
   * settled. Answers the final record's save (not awaited: the slot frees first), which lands
   * after the task's cgroups are removed.
   */
  private async afterExit(id: string, entry: RunningEntry, current: Task, plan: TaskResources, result: SpawnExit): Promise<{ saved: Promise<Task> }> {
    // Background jobs, setsid escapees: a stop has waited for them already. In a sandbox the pid
    // namespace is emptied by the kernel; without one, the cgroup lists what is left exactly, and
    // without cgroups the marker finds it.
    if (entry.stopped) await entry.stopped
    else if (current.sandbox === 'off') {
      const cgroups = plan.cgroups
      if (cgroups) await killMembers(() => cgroups.members())
      else await killLeftovers([taskMarker(current)], [entry.pid])
    }
    if (result.unknown || result.lifelineBroke || result.leaseRanOut) {
      await plan.release()
      await this.beforeEnding(id)
      const outputBytes = await this.settleOutput(this.store.current(id))
      // Ended by its keeper when the spawner's helper went: this daemon's, or (resumed just then) the last daemon's.
      const lifeline = result.leaseRanOut ? LEASE_RAN_OUT : entry.endsWithDaemon ? SPAWNER_ENDED_LIFELINE : DAEMON_ENDED_LIFELINE
      const reason = result.unknown ? 'its keeper is gone without recording how it ended; what was left of it was killed' : lifeline
      return { saved: this.store.transition(id, (task) => withOutputLoss(markLost(task, reason, outputBytes, new Date()), result.outputLostBytes)) }
    }
    const limits = (await plan.cgroups?.limitsHit()) ?? { memory: null, pids: null }
    // Nothing of the task writes into its folder once it is recorded ended: its keeper has written its exit file.
    if (current.state === 'running' && current.keeper) await keeperWritten(this.config.layout.spool, id, entry.pid)
    // Removing the cgroups can wait a moment for the kernel to let go of the last process; the
    // slot need not, the final record does (no group outlives it).
    const released = plan.release()
    const ending = decideEnding(entry, result, limits)
    await this.beforeEnding(id)
    const outputBytes = await this.settleOutput(this.store.current(id))
    return { saved: released.then(() => this.store.transition(id, (task) => withOutputLoss(markEnded(task, ending, outputBytes, new Date()), result.outputLostBytes))) }
  }

  /** The spawner watching a task died, and the task's exit status with it: the task is stopped and recorded lost. */
  private async spawnerLost(id: string, entry: RunningEntry, plan: TaskResources, error: Error): Promise<Task> {
    this.log.error({ taskId: id, err: error }, 'the spawner died while the task ran; stopping it')
    await killTree({ taskId: id, marker: taskMarker(this.store.current(id)), pid: entry.pid, ...(entry.leader === undefined ? {} : { leader: entry.leader }), signal: 'SIGKILL', graceMs: 0, leaderExited: leaderGone(entry.pid, entry.exited), members: entry.members }).catch(
      (killError: unknown) => this.log.error({ taskId: id, err: killError }, 'task tree did not die'),
    )
    if (entry.stopped) await entry.stopped
    await plan.release()
    await this.beforeEnding(id)
    const outputBytes = await this.settleOutput(this.store.current(id))
    return this.store.transition(id, (task) => markLost(task, `tend's process spawner died while the task ran (${error.message}); the task was stopped`, outputBytes, new Date()))
  }

  private stop(id: string, entry: RunningEntry, stopping: Stopping): void {
    if (entry.stopping) return
    // It has already exited (reported, or a zombie not yet reaped): it ended by itself, and is
    // recorded as it ended, not as stopped by tend.
    const leaderRuns = entry.leader === undefined ? isProcessRunning(entry.pid) : entry.leader !== null && isAliveIdentity(entry.leader)
    if (entry.exitKnown || !leaderRuns) return
    entry.stopping = stopping
    entry.leaderHandles = handlesSignal(entry.pid, stopping.signal)
    entry.timeoutTimer?.clear()
    this.log.info({ taskId: id, reason: stopping.reason }, 'task stopping')
    entry.stopped = killTree({
      taskId: id,
      marker: taskMarker(this.store.current(id)),
      pid: entry.pid,
      ...(entry.leader === undefined ? {} : { leader: entry.leader }),
      signal: stopping.signal,
      graceMs: stopping.graceMs,
      leaderExited: leaderGone(entry.pid, entry.exited),
      members: entry.members,
      wrapped: entry.wrapped,
    }).then(
      (result) => {
        entry.signalled = result.signalled
      },
      (error: unknown) => this.log.error({ taskId: id, err: error }, 'task tree did not die'),
    )
    // The kill waits for the exit its keeper reports: a keeper or helper that does not answer is made to.
    this.answerExit(id, entry, stopping.graceMs)
  }

  /** Watches for an exit that a stopped keeper or helper does not report (once per task). */
  private answerExit(id: string, entry: RunningEntry, graceMs: number): void {
    if (entry.answering) return
    entry.answering = true
    void answerUnreportedExit({
      exited: entry.exited,
      keeper: entry.keeper,
      graceMs,
      prodHelper: () => this.spawner.prod?.(),
      onContinued: (keeper) => this.log.warn({ taskId: id, keeper }, 'the keeper of a task that ended or is being stopped was itself stopped (SIGSTOP); continued'),
    })
  }

  /** A leader that has ended (kernel fact: its process is gone) while its exit goes unreported: its keeper or helper is made to answer. */
  private checkLeader(id: string, entry: RunningEntry): void {
    if (entry.exitKnown || entry.answering || !entry.keeper || entry.leader === undefined) return
    if (entry.leader !== null && isAliveIdentity(entry.leader)) return
    this.answerExit(id, entry, 0)
  }

  /**
   * Final output size; output past the cap (written between two checks) is cut off, and disk taken
   * past the output's end given back (a truncation to its own size frees it).
   */
  private async settleOutput(task: Task): Promise<number> {
    const file = outputPath(this.config.layout.spool, task.id)
    const held = this.outputs.held(task.id)
    const footprint = held ? heldFootprintOrNull(held) ?? outputFootprintSync(file) : outputFootprintSync(file)
    const cut = footprint.size > task.maxOutputBytes ? task.maxOutputBytes : holdsDiskPastEnd(footprint, task.maxOutputBytes) ? footprint.size : null
    // A file the task holds a lease on, or replaced, stays as it is: the record still says the cap.
    const cutOff = (bytes: number) => (held ? held.truncate(bytes) : truncateRegularFile(file, bytes))
    if (cut !== null) await cutOff(cut).catch((error: unknown) => this.log.warn({ taskId: task.id, err: error }, 'output past its cap could not be cut off'))
    return Math.min(footprint.size, task.maxOutputBytes)
  }

  private async checkOutputs(): Promise<void> {
    for (const [id, entry] of this.running) {
      this.checkLeader(id, entry)
      await this.checkOutput(id, entry)
    }
  }

  /** Stops a task whose output has passed its cap. */
  private async checkOutput(id: string, entry: RunningEntry): Promise<void> {
    const task = this.store.findCurrent(id)
    if (!task) return
    const held = this.outputs.held(id)
    const footprint = await (held ? heldFootprint(held) : outputFootprint(outputPath(this.config.layout.spool, id))).catch(() => ({ size: task.outputBytes, allocatedBytes: 0 }))
    this.store.patch(id, { outputBytes: Math.min(footprint.size, task.maxOutputBytes) })
    const over = outputOverCap(footprint, task.maxOutputBytes)
    if (over !== null && !entry.stopping) {
      this.stop(id, entry, { state: 'killed', stoppedBy: 'output-cap', reason: over, signal: 'SIGTERM', graceMs: this.config.killGraceMs })
    }
  }


  /** Holds the task's output.log; one that cannot be held (gone, replaced) is read by its path, as before. */
  private async holdOutput(id: string, file: string): Promise<void> {
    await this.outputs.hold(id, file).catch((error: unknown) => this.log.warn({ taskId: id, err: error }, 'output.log cannot be held open: it is read by its path'))
  }

  private finishTask(task: Task): void {
    if (!isFinished(task)) return
    this.outputWatch.wakeAll(task.id)
    this.onTaskFinished(task)
  }
}

/** What a launch would have planned for a task that an earlier daemon started: its cgroups, to watch and release. */
async function resumedPlan(task: RunningTask, capabilities: SandboxCapabilities, networks: OwnerNetworks | null, config: Readonly<DaemonConfig>): Promise<TaskResources> {
  const cgroups = TaskCgroups.existing(capabilities.cgroups, task.id, { memoryBytes: task.memoryBytes, pidsMax: task.pidsMax })
  // Its owner's next tasks join the namespace it is in.
  const lease = task.sandbox !== 'off' && task.network !== 'host' ? (networks?.adopt({ id: task.id, owner: task.owner, network: task.network, pid: task.pid, allow: task.network === 'allow' ? taskAllowList(config.networkAllow, task.allowNet) : [] }) ?? null) : null
  const release = async () => {
    await cgroups?.remove()
    lease?.release()
  }
  return { cgroups, release }
}

/** This boot's id: a task recorded in another boot cannot still be running. */
export function readBootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
  } catch {
    return 'unknown'
  }
}

/** Whether a process catches or ignores a signal (/proc/<pid>/status SigCgt, SigIgn); true when unknown. */
function handlesSignal(pid: number, signal: NodeJS.Signals | number): boolean {
  const number = typeof signal === 'number' ? signal : (constants.signals as Record<string, number>)[signal]
  if (!number) return true
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const mask = (name: string) => BigInt(`0x${new RegExp(`^${name}:\\s*([0-9a-f]+)$`, 'm').exec(status)?.[1] ?? 'ffffffffffffffff'}`)
    const bit = 1n << BigInt(number - 1)
    return ((mask('SigCgt') | mask('SigIgn')) & bit) !== 0n
  } catch {
    return true
  }
}

/** A live process, not a zombie waiting to be reaped. */
function isProcessRunning(pid: number): boolean {
  const state = processState(pid)
  return state !== null && state !== 'Z' && state !== 'X'
}

function withNote(reason: string, note: string | undefined): string {
  return note ? `${reason}: ${note}` : reason
}

/** The held output's footprint; null when its descriptor was let go of meanwhile. */
function heldFootprintOrNull(held: Parameters<typeof heldFootprintSync>[0]): ReturnType<typeof heldFootprintSync> | null {
  try {
    return heldFootprintSync(held)
  } catch {
    return null
  }
}
