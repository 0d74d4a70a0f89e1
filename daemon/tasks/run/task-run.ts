import { isFinished, type RunningTask, type Task, type TaskUsage } from '../../../protocol/index.js'
import { exitPath } from '../../../spool/index.js'
import { protectedSinceAdmission } from '../../sandbox/index.js'
import { killTree } from '../../spawn/kill-tree.js'
import { isAliveIdentity, type ProcessIdentity } from '../../spawn/process-scan.js'
import { taskMarker } from '../../spawn/run-name.js'
import type { SpawnExit } from '../../spawn/spawner.js'
import { decideEnding, outputCapStop, SPAWNER_ENDED_LIFELINE, DAEMON_ENDED_LIFELINE, timeoutStop, type Stopping } from './ending.js'
import { endedRecord, keeperEndedReason, killKeeperTree, killRemains, killStartedTree, startedTree, type RecordedEnd } from './finish.js'
import { keeperWritten } from './keeper-exit.js'
import { handlesSignal, isProcessRunning } from './leader-state.js'
import type { LaunchOutcome } from './launch.js'
import { setLongTimeout, type LongTimeout } from './long-timeout.js'
import { outputPastCap, settledOutputBytes } from './run-output.js'
import { SettleLater } from './settle-later.js'
import { startProcess } from './start-process.js'
import { trackedProcess, type LaunchNeeds, type TaskResources, type TaskRunContext, type Tracked } from './task-run-context.js'
import { sampledTask, usageAtEnd } from './task-usage.js'
import { markFailed, markStarted } from '../transitions.js'
import { answerRunExit } from './unanswered-exit.js'
import { outcomeOf } from './outcome.js'
import type { SampledTask } from '../usage/live-sampler.js'
import { ReadinessWatch } from '../ready/readiness-watch.js'
import { taskProcesses } from '../ports/task-processes.js'

const KEEPER_GONE_UNRECORDED = 'its keeper is gone without recording how it ended; what was left of it was killed'

/**
 * One task's life, top to bottom: launch (or resume), track, stop, finish. The only code that
 * touches a task's processes; the Supervisor only keeps the runs.
 */
export class TaskRun {
  /** Settles once the launch is over (tracked, failed, or killed meanwhile): a kill waits for it. Null when none is under way. */
  launching: Promise<void> | null = null
  /** The final record; rejects if supervision failed. Nobody may ask: most tasks end unwatched. */
  readonly finished = new SettleLater<Task>()
  /** This daemon started it to end with it (endsWithDaemon): a restart cannot hand it over. */
  endsWithDaemon = false
  private tracked: Tracked | null = null
  /** Set when tend itself stops the task: how the ending is to be recorded, and who asked. */
  private stopping?: Stopping
  private stopped?: Promise<void>
  /** After a stop: whether its first signal reached a live process of the task (else it had ended by itself). */
  private signalled?: boolean
  /** When the stop began: whether the leader caught or ignored its signal (else that signal would have ended it). */
  private leaderHandles?: boolean
  private timeoutTimer?: LongTimeout
  /** The spawner has reported the leader's exit. */
  private exitKnown = false
  /** A watch for an exit its keeper does not report has begun (answerRunExit). */
  private answering = false
  /** Its readiness condition's watch, while it waits for it. */
  private readiness: ReadinessWatch | null = null

  constructor(
    private readonly context: TaskRunContext,
    readonly id: string,
    /** Null for a task an earlier daemon started; let go of once launched (nothing of it stays reachable while the task runs). */
    private needs: LaunchNeeds | null,
  ) {}

  /** Whether the task's process is tracked: a kill stops it, output checks look at it. */
  get running(): boolean {
    return this.tracked !== null
  }

  /** A queued task cancelled or failed before its launch began: it never starts. */
  dropLaunch(): void {
    this.needs = null
  }

  // ---------------------------------------------------------------- launch

  /**
   * From its slot to its end: launch, track, watch; resolves (the slot frees) when no process of it
   * is left. While the task runs, what waits for it is one promise reaction on its exit.
   */
  async run(): Promise<void> {
    const launched = await this.launch()
    if (!launched) return this.context.forget(this)
    const { current, outcome, settle } = launched
    const { store, log, capabilities } = this.context
    this.track(current, outcome.pid, outcome.exited, { cgroups: outcome.plan.cgroups, release: outcome.plan.release }, outcome.keeper)
    // Running from now on, in memory at once (a kill waiting on the launch then finds it running);
    // the record is written while the task runs: neither the task nor its slot waits for it.
    const { ranAs } = outcome.plan
    store
      .transition(this.id, (task) => markStarted(task, outcome.pid, new Date(), outcome.keeper, this.context.bootId, ranAs))
      .catch((error: unknown) => log.error({ taskId: this.id, err: error }, 'writing the running record failed'))
    settle()
    this.armTimeout(current.timeoutMs, Date.now())
    this.watchReadiness(store.current(this.id))
    log.info({ taskId: this.id, pid: outcome.pid, uid: ranAs.uid }, 'task started')
    // A daemon-wide fallback is said once, at start; this one is this task's alone.
    if (ranAs.fallback && ranAs.fallback !== capabilities.identity.fallback)
      log.warn({ taskId: this.id, fallback: ranAs.fallback }, 'task runs as uid 0 (without capabilities), not on its own identity')
    return this.watch()
  }

  /**
   * Starts the queued task's process. Answers null when there is nothing to watch: the task failed
   * to start (recorded here), or was killed or the daemon stopped meanwhile (recorded by them; its
   * tree is killed here). Otherwise `settle()` must be called once the task is tracked.
   */
  private async launch(): Promise<{ current: Task; outcome: Extract<LaunchOutcome, { started: true }>; settle: () => void } | null> {
    const { store, log, outputs } = this.context
    const task = store.findCurrent(this.id)
    if (!task || task.state !== 'queued') return null
    const needs = this.needs
    this.needs = null
    if (!needs) return this.fail('the task was accepted by an earlier daemon and never started')
    // Admitted while the daemon began to stop (after its pass over the queued tasks): it never
    // starts, or it would run on with nobody to stop it.
    if (!this.context.daemon.accepting) return this.fail('daemon stopped before the task started', 'daemon-stop')
    // Checked again on what is protected now: it may have waited long enough for a home to appear in its cwd.
    const view = task.sandbox === 'off' ? null : this.context.protectedView()
    const protectedNow = view && protectedSinceAdmission(task.sandbox, needs.paths, view.places)
    if (protectedNow) {
      log.info({ taskId: this.id, reason: protectedNow }, 'task failed to start')
      return this.fail(protectedNow)
    }
    let launchSettled!: () => void
    this.launching = new Promise<void>((resolve) => (launchSettled = resolve))
    const settle = () => {
      this.launching = null
      launchSettled()
    }
    this.endsWithDaemon = needs.endsWithDaemon
    const outcome = await startProcess(this.context, task, needs, view?.masks ?? [])
    const current = store.current(this.id)
    if (current.state !== 'queued') {
      if (outcome.started) {
        await killStartedTree(log, current, outcome)
        await outcome.plan.release()
      }
      await outputs.release(this.id)
      settle()
      return null
    }
    if (!outcome.started) {
      log.info({ taskId: this.id, reason: outcome.reason }, 'task failed to start')
      await outputs.release(this.id)
      settle()
      return this.fail(outcome.reason)
    }
    return { current, outcome, settle }
  }

  /** Records the queued task failed to start (unless something else recorded it meanwhile). */
  private async fail(reason: string, stoppedBy?: 'daemon-stop'): Promise<null> {
    this.finishTask(
      await this.context.store.transition(this.id, (current) =>
        current.state === 'queued' ? markFailed(current, reason, new Date(), stoppedBy ?? null) : null,
      ),
    )
    return null
  }

  // ----------------------------------------------------------------- track

  /**
   * Tracks the started task (or one an earlier daemon started, resume.ts): kills, stops and
   * output checks find it from now on.
   */
  track(current: Task, pid: number, exited: Promise<SpawnExit>, resources: TaskResources, keeper: RunningTask['keeper']): void {
    this.tracked = trackedProcess(current, pid, exited, resources, keeper)
  }

  /** What the live sampler reads of the task (task-usage.ts); null once its end is known, or before it is tracked. */
  sampled(startedAtMs: number): SampledTask | null {
    const tracked = this.tracked
    return tracked && !this.exitKnown ? sampledTask(this.id, tracked, startedAtMs) : null
  }

  /** The leader as read when the task was tracked (null: it had ended already; undefined: no keeper). */
  get leader(): ProcessIdentity | null | undefined {
    return this.tracked?.leader
  }

  /** The task's processes now (task-processes.ts): empty when it is not tracked. */
  processes(): Promise<number[]> {
    const tracked = this.tracked
    return tracked ? taskProcesses(tracked, taskMarker(this.context.store.current(this.id))) : Promise.resolve([])
  }

  /** Stops the task at its deadline (counted from when it started); one already past stops it now. */
  armTimeout(timeoutMs: number | null, startedAtMs: number): void {
    if (timeoutMs === null) return
    const stop = () => this.stop(timeoutStop(timeoutMs, this.context.config.killGraceMs))
    this.timeoutTimer = setLongTimeout(stop, Math.max(0, startedAtMs + timeoutMs - Date.now()))
  }

  /** Watches the running task's readiness condition while it waits for it (from its start; again after a restart). */
  watchReadiness(task: Task): void {
    const { store, log, outputs, outputWatch, config, networks } = this.context
    this.readiness = ReadinessWatch.start({ store, log, outputs, outputWatch, spoolRoot: config.layout.spool, networks }, task)
  }

  /** The daemon leaves its tasks to the next one: no timeout of this one fires here any more, nor is its readiness watched. */
  disarmTimeout(): void {
    this.timeoutTimer?.clear()
    this.readiness?.stop()
  }

  /** Waits for the task's end, then records it; resolves when no process of it is left. Called right after track(). */
  watch(): Promise<void> {
    return this.tracked!.exited.then(
      (exit) => {
        this.exitKnown = true
        return this.finish(exit)
      },
      (error: unknown) => this.finish(error instanceof Error ? error : new Error(String(error))),
    )
  }

  /** Stops a task whose output has passed its cap (run-output.ts). */
  async checkOutput(): Promise<void> {
    const over = await outputPastCap(this.context, this.id)
    if (over !== null && !this.stopping) this.stop(outputCapStop(over, this.context.config.killGraceMs))
  }

  /** A leader that has ended (kernel fact: its process is gone) while its exit goes unreported: its keeper or helper is made to answer. */
  checkLeader(): void {
    const tracked = this.tracked
    if (!tracked || this.exitKnown || this.answering || !tracked.keeper || tracked.leader === undefined) return
    if (tracked.leader !== null && isAliveIdentity(tracked.leader)) return
    this.answerExit(0)
  }

  // ------------------------------------------------------------------ stop

  /** Stops the task: its tree gets `stopping.signal`, then KILL after the grace. A task that has ended by itself is recorded as it ended. */
  stop(stopping: Stopping): void {
    const tracked = this.tracked
    if (!tracked || this.stopping) return
    // It has already exited (reported, or a zombie not yet reaped): it ended by itself, and is
    // recorded as it ended, not as stopped by tend.
    const leaderRuns = tracked.leader === undefined ? isProcessRunning(tracked.pid) : tracked.leader !== null && isAliveIdentity(tracked.leader)
    if (this.exitKnown || !leaderRuns) return
    this.stopping = stopping
    this.leaderHandles = handlesSignal(tracked.pid, stopping.signal)
    this.timeoutTimer?.clear()
    const { log, store } = this.context
    log.info({ taskId: this.id, reason: stopping.reason }, 'task stopping')
    const tree = startedTree(store.current(this.id), tracked)
    this.stopped = killTree({ ...tree, signal: stopping.signal, graceMs: stopping.graceMs, wrapped: tracked.wrapped }).then(
      (result) => {
        this.signalled = result.signalled
      },
      (error: unknown) => log.error({ taskId: this.id, err: error }, 'task tree did not die'),
    )
    // The kill waits for the exit its keeper reports: a keeper or helper that does not answer is made to.
    this.answerExit(stopping.graceMs)
  }

  /** Watches for an exit that a stopped keeper or helper does not report (once per task). */
  private answerExit(graceMs: number): void {
    const tracked = this.tracked
    if (!tracked || this.answering) return
    this.answering = true
    void answerRunExit(this.context, this.id, tracked, graceMs)
  }

  // ---------------------------------------------------------------- finish

  /** The task's leader has exited, or its spawner lost it (an Error): its end is recorded. */
  private async finish(exit: SpawnExit | Error): Promise<void> {
    const { store, log, outputs } = this.context
    this.readiness?.stop()
    let saved: Promise<Task>
    try {
      const outcome = outcomeOf(exit, {
        keepingTasks: this.context.daemon.keepingTasks,
        task: this.context.store.current(this.id),
        spoolRoot: this.context.config.layout.spool,
        pid: this.tracked!.pid,
      })
      if (outcome.kind === 'kept') {
        void outputs.release(this.id)
        this.finished.resolve(store.get(this.id))
        return
      }
      this.timeoutTimer?.clear()
      saved = outcome.kind === 'spawner-lost' ? this.recordSpawnerLost(outcome.error) : (await this.recordExit(outcome.exit)).saved
    } catch (error) {
      saved = Promise.reject(error)
    }
    // No process of the task is left: its slot frees now, and its final record lands on its own.
    void saved.then(
      (ended) => {
        log.info({ taskId: this.id, state: ended.state, exitCode: ended.exitCode, signal: ended.signal }, 'task ended')
        this.letGo()
        this.finishTask(ended)
        this.finished.resolve(ended)
      },
      (error: unknown) => {
        this.letGo()
        log.error({ taskId: this.id, err: error }, 'task supervision failed')
        this.finished.reject(error)
      },
    )
  }

  /**
   * The leader has exited: whatever it left behind goes, its limits are read and its output size
   * settled. Answers the final record's save (not awaited: the slot frees first), which lands
   * after the task's cgroups are removed.
   */
  private async recordExit(exit: SpawnExit): Promise<{ saved: Promise<Task> }> {
    const { store, config } = this.context
    const { pid, resources } = this.tracked!
    const current = store.current(this.id)
    // Background jobs, setsid escapees: a stop has waited for them already. In a sandbox the pid
    // namespace is emptied by the kernel; whatever is still below the keeper goes either way (its
    // keeper stays until then: leftovers.c).
    if (this.stopped) await this.stopped
    else if (current.sandbox === 'off') await killRemains(current, resources.cgroups, pid, this.tracked!.keeper)
    else await killKeeperTree(this.tracked!.keeper)
    // Ended by its keeper when the spawner's helper went: this daemon's, or (resumed just then) the last daemon's.
    if (exit.unknown) return { saved: this.recordLost(KEEPER_GONE_UNRECORDED, exit.outputLostBytes) }
    if (exit.lifelineBroke || exit.leaseRanOut)
      return {
        saved: this.recordLost(
          keeperEndedReason(exit, this.endsWithDaemon ? SPAWNER_ENDED_LIFELINE : DAEMON_ENDED_LIFELINE),
          exit.outputLostBytes,
          await this.usageOf(exit),
        ),
      }
    const limits = (await resources.cgroups?.limitsHit()) ?? { memory: null, pids: null }
    // Nothing of the task writes into its folder once it is recorded ended: its keeper has written its exit file.
    if (current.state === 'running' && current.keeper)
      await keeperWritten({
        spoolRoot: config.layout.spool,
        id: this.id,
        pid,
        keeper: current.keeper,
        exitFile: exitPath(config.layout.spool, this.id),
        spawner: this.context.spawner,
      })
    // Read before the groups go: the memory group's high-water mark goes with it.
    const usage = await this.usageOf(exit)
    // Removing the cgroups can wait a moment for the kernel to let go of the last process; the
    // slot need not, the final record does (no group outlives it).
    const released = resources.release()
    const ending = decideEnding(
      { stopping: this.stopping, wrapped: this.tracked!.wrapped, signalled: this.signalled, leaderHandles: this.leaderHandles },
      exit,
      limits,
    )
    await this.context.beforeEnding(this.id)
    const outputBytes = await settledOutputBytes(this.context, this.id)
    return { saved: released.then(() => this.recordEnd({ ending }, outputBytes, exit.outputLostBytes, usage)) }
  }

  /** What the task used (task-usage.ts), read before its groups go. */
  private usageOf(exit: SpawnExit): Promise<TaskUsage | undefined> {
    const { config, log, store } = this.context
    return usageAtEnd(exit, this.tracked!, config.layout.spool, { taskId: this.id, startedAt: store.current(this.id).startedAt, log })
  }

  /** The spawner watching the task died, and the task's exit status with it: the task is stopped and recorded lost. */
  private async recordSpawnerLost(error: Error): Promise<Task> {
    const { log, store } = this.context
    log.error({ taskId: this.id, err: error }, 'the spawner died while the task ran; stopping it')
    await killStartedTree(log, store.current(this.id), this.tracked!)
    if (this.stopped) await this.stopped
    return this.recordLost(`tend's process spawner died while the task ran (${error.message}); the task was stopped`)
  }

  /** Release, settle, mark lost: nobody knows how the task ended. */
  private async recordLost(reason: string, outputLostBytes?: number, usage?: TaskUsage): Promise<Task> {
    await this.tracked!.resources.release()
    await this.context.beforeEnding(this.id)
    const outputBytes = await settledOutputBytes(this.context, this.id)
    return this.recordEnd({ lost: reason }, outputBytes, outputLostBytes, usage)
  }

  private recordEnd(end: RecordedEnd, outputBytes: number, outputLostBytes: number | undefined, usage?: TaskUsage): Promise<Task> {
    return this.context.store.transition(this.id, (task) => endedRecord(task, end, outputBytes, new Date(), outputLostBytes, usage))
  }

  /** The run is over: the registry and the held output let go of it. */
  private letGo(): void {
    this.context.forget(this)
    void this.context.outputs.release(this.id)
  }

  /** Readers waiting on a finished task's output are woken: there is no more. */
  private finishTask(task: Task): void {
    if (isFinished(task)) this.context.outputWatch.wakeAll(task.id)
  }
}
