import { isFinished, TendError, type StartTaskBody, type Task, type TaskDependencies, type TaskEvent } from '../../../protocol/index.js'

/**
 * The dependencies a start request asks for, checked: each an existing task the requester may see
 * (an owner: its own), given once. A task cannot wait for itself or for a task that waits for it:
 * it waits only for tasks that exist before it, so no cycle can form. Null: none asked.
 */
export function checkDependencies(
  request: Pick<StartTaskBody, 'after' | 'afterAny'>,
  find: (id: string) => Task | undefined,
  scope: { owner: string | null; id?: string },
): TaskDependencies | null {
  if (request.after === undefined) {
    if (request.afterAny !== undefined)
      throw new TendError('TEND_ERR_VALIDATION', { detail: 'body/afterAny: says how to wait for the tasks of after, and no after was given' })
    return null
  }
  const ids = [...new Set(request.after)]
  for (const [index, id] of request.after.entries()) {
    const task = find(id)
    if (id === scope.id) throw new TendError('TEND_ERR_VALIDATION', { detail: `body/after/${index}: a task cannot wait for itself (${id})` })
    if (task === undefined || (scope.owner !== null && task.owner !== scope.owner))
      throw new TendError('TEND_ERR_VALIDATION', { detail: `body/after/${index}: no task ${id} (a task waits only for tasks that exist when it is started)` })
  }
  return { ids, any: request.afterAny ?? false }
}

/** How a dependency ended, as far as a waiting task is concerned: its final record, or removed before it was seen to end. */
export type DependencyOutcome = Task | 'removed'

/** What a waiting task does now: wait on, start, or fail with this reason. */
export type DependencyVerdict = { wait: true } | { start: true } | { fail: string }

/**
 * The verdict on a task that waits for `after.ids`, given the outcomes known so far. Without
 * `any`, the first dependency that ended otherwise than exiting 0 fails it at once (it can never
 * start: waiting for the others would only delay saying so); it starts once all exited 0. With
 * `any`, it starts once all have ended, however.
 */
export function dependencyVerdict(after: TaskDependencies, outcomes: ReadonlyMap<string, DependencyOutcome>): DependencyVerdict {
  let pending = false
  for (const id of after.ids) {
    const outcome = outcomes.get(id)
    if (outcome === undefined) {
      pending = true
      continue
    }
    if (after.any) continue
    const failure = dependencyFailure(id, outcome)
    if (failure !== null) return { fail: failure }
  }
  return pending ? { wait: true } : { start: true }
}

/** Why a dependency that ended keeps its dependants from starting (`dependency abc exited 2`); null when it exited 0. */
export function dependencyFailure(id: string, outcome: DependencyOutcome): string | null {
  if (outcome === 'removed') return `dependency ${id} was removed`
  switch (outcome.state) {
    case 'exited':
      return outcome.exitCode === 0 ? null : `dependency ${id} exited ${outcome.exitCode}`
    case 'killed':
      return `dependency ${id} was killed`
    case 'timed_out':
      return `dependency ${id} timed out`
    case 'lost':
      return `dependency ${id} was lost`
    default:
      return `dependency ${id} failed`
  }
}

/** What the gate acts through: the store's reported records and events, and the supervisor's start and fail. */
export interface DependencyGateOptions {
  /** A task as it is on disk (the store's reported version); undefined once removed. */
  find: (id: string) => Task | undefined
  /** Every event the store announces, in order: each once its version is on disk. */
  subscribe: (listener: (event: TaskEvent) => void) => () => void
  /** Every dependency is done with: start it (it is still queued, or the callee checks). */
  release: (id: string) => void
  /** A dependency ended so that it can never start. */
  fail: (id: string, reason: string) => void
  /** A waiting task ended while it waited (killed, failed at a stop): nothing is to start. */
  dropped: (id: string) => void
}

interface Waiting {
  after: TaskDependencies
  outcomes: Map<string, DependencyOutcome>
}

/**
 * Queued tasks that wait for others (`after`), held out of the scheduler until their dependencies
 * have ended. Woken by the store's own announcements (a dependency's end, or its removal), never by
 * polling; each verdict is made from records already on disk, so a daemon that restarts judges the
 * same way (recovery hands the waiting tasks back through `wait`).
 */
export class DependencyGate {
  private readonly waiting = new Map<string, Waiting>()
  /** Per dependency, the tasks waiting for it. */
  private readonly dependants = new Map<string, Set<string>>()

  constructor(private readonly options: DependencyGateOptions) {
    options.subscribe((event) => this.announced(event))
  }

  /** Holds a queued task until its dependencies have ended; judged at once on those that already have. */
  wait(task: Task & { after: TaskDependencies }): void {
    const outcomes = new Map<string, DependencyOutcome>()
    for (const id of task.after.ids) {
      const dependency = this.options.find(id)
      if (dependency === undefined) outcomes.set(id, 'removed')
      else if (isFinished(dependency)) outcomes.set(id, dependency)
    }
    this.waiting.set(task.id, { after: task.after, outcomes })
    for (const id of task.after.ids) {
      const waiters = this.dependants.get(id) ?? new Set<string>()
      waiters.add(task.id)
      this.dependants.set(id, waiters)
    }
    this.judge(task.id)
  }

  /** Whether this task is held here (queued, its dependencies not all done with). */
  holds(id: string): boolean {
    return this.waiting.has(id)
  }

  private announced(event: TaskEvent): void {
    const removed = event.type === 'task.removed'
    if (this.waiting.has(event.taskId) && (removed || isFinished(event.task))) {
      this.forget(event.taskId)
      this.options.dropped(event.taskId)
    }
    const waiters = this.dependants.get(event.taskId)
    if (!waiters || (!removed && !isFinished(event.task))) return
    for (const id of [...waiters]) {
      const outcomes = this.waiting.get(id)?.outcomes
      if (!outcomes || outcomes.has(event.taskId)) continue
      outcomes.set(event.taskId, removed ? 'removed' : event.task)
      this.judge(id)
    }
  }

  private judge(id: string): void {
    const waiting = this.waiting.get(id)
    if (!waiting) return
    const verdict = dependencyVerdict(waiting.after, waiting.outcomes)
    if ('wait' in verdict) return
    this.forget(id)
    if ('start' in verdict) this.options.release(id)
    else this.options.fail(id, verdict.fail)
  }

  private forget(id: string): void {
    const waiting = this.waiting.get(id)
    if (!waiting) return
    this.waiting.delete(id)
    for (const dependency of waiting.after.ids) {
      const waiters = this.dependants.get(dependency)
      waiters?.delete(id)
      if (waiters?.size === 0) this.dependants.delete(dependency)
    }
  }
}
