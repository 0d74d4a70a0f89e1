import type { QueuedTask, Task, TaskDependencies } from '../../../protocol/index.js'
import { TaskRun } from '../run/task-run.js'
import type { TaskRunContext } from '../run/task-run-context.js'
import { markFailed } from '../transitions.js'
import { DependencyGate } from './dependencies.js'
import type { Scheduler } from './scheduler.js'
import { waitAgain } from './wait-again.js'

/** What WaitingRuns is made with: the supervisor's runs and queue. */
export interface WaitingRunsOptions {
  context: TaskRunContext
  /** The supervisor's runs, by task id: a waiting task's run is in it while it waits. */
  runs: Map<string, TaskRun>
  scheduler: Scheduler
  /** Wakes the readers of a task recorded finished (its output has no more). */
  wakeReaders: (task: Task) => void
}

/**
 * Queued tasks held out of the queue until their dependencies end (`after`; the gate in
 * dependencies.ts, woken by the store's announcements): each is released to the scheduler as its
 * run, or recorded failed and its run let go of.
 */
export class WaitingRuns {
  private readonly gate: DependencyGate

  constructor(private readonly options: WaitingRunsOptions) {
    const { store } = options.context
    this.gate = new DependencyGate({
      find: (id) => store.find(id),
      subscribe: (listener) => store.subscribe(listener),
      release: (id) => this.release(id),
      fail: (id, reason) => void this.fail(id, reason),
      dropped: (id) => this.dropRun(id),
    })
  }

  /** Holds an admitted task (its run already registered) until its dependencies have ended. */
  wait(task: Task & { after: TaskDependencies }): void {
    this.gate.wait(task)
  }

  /** Whether the task still waits for its dependencies. */
  holds(id: string): boolean {
    return this.gate.holds(id)
  }

  /**
   * Holds again a task an earlier daemon left waiting for its dependencies (recovery.ts): judged at
   * once on those that ended meanwhile. Its environment's values were never stored, so a task that
   * had any cannot start as asked: it fails, saying so.
   */
  async rewait(task: QueuedTask): Promise<void> {
    const { context } = this.options
    const waiting = await waitAgain(context, task)
    if ('fail' in waiting) {
      await this.fail(task.id, waiting.fail)
      return
    }
    this.options.runs.set(task.id, new TaskRun(context, task.id, waiting.needs))
    this.gate.wait({ ...task, after: waiting.after })
  }

  /** A waiting task's dependencies are done with: it takes its turn in the queue like any task. */
  private release(id: string): void {
    const run = this.options.runs.get(id)
    const task = this.options.context.store.findCurrent(id)
    if (!run || task?.state !== 'queued') return
    this.options.scheduler.submit(task.owner, () => run.run())
  }

  /** A waiting task that can never start: recorded failed, its run let go of. */
  private async fail(id: string, reason: string): Promise<void> {
    const { store, log } = this.options.context
    this.dropRun(id)
    const failed = await store.transition(id, (current) => (current.state === 'queued' ? markFailed(current, reason, new Date()) : null))
    log.info({ taskId: id, reason }, 'task failed to start')
    this.options.wakeReaders(failed)
  }

  /** A queued task that will never launch: its run is let go of (a waiting one never reached the scheduler, which would). */
  private dropRun(id: string): void {
    const run = this.options.runs.get(id)
    if (!run) return
    run.dropLaunch()
    this.options.context.forget(run)
  }
}
