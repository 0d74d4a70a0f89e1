import { rm } from 'node:fs/promises'
import type { Logger } from 'pino'
import { isFinished, TendError, type Task } from '../../protocol/index.js'
import { taskDir } from '../../spool/index.js'
import { RecordWriter } from './record-writer.js'
import type { EventLog } from './event-log.js'
import { spoolWriteError } from './spool-errors.js'

export interface ListFilter {
  /** Include finished tasks. */
  all?: boolean
  owner?: string
}

/** A change of one task, computed from its current version; null when there is nothing to change. */
export type Transition = (current: Task) => Task | null

/** The order tasks are listed in: created first, then by id. */
export function listOrder(a: Task, b: Task): number {
  return a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0
}

/** How long a record that could not be written (disk full) waits before the next try, at most. */
const RETRY_MAX_MS = 5000

/**
 * The daemon's tasks: held in memory, each change written to its task.json and announced on the
 * event log once it is on disk.
 *
 * Each task has two versions in memory. Its *current* one is what changes are made from: every
 * change is a compare-and-set on it, so `transition()` computes the next version and installs it
 * in the same synchronous step, and no change is ever made from a stale copy. Its *reported* one
 * is the newest version on disk: `get`, `find`, `list` and `whenState` answer only that, because
 * the next daemon believes task.json, and a reply ahead of it would be undone by a crash (a task
 * answered running with a pid, then found queued and failed). The supervisor decides from
 * `current`; anything that answers a reader reads the reported version.
 *
 * Versions reach the disk in order (the record writer never writes an older one over a newer
 * one), and each is reported and announced, in order, only once it is there. A record that
 * cannot be written for lack of space is retried until it lands (the newest version of the task,
 * never an older one); its event waits for it. The live output size is not a version: it is
 * patched into both.
 */
export class TaskStore {
  /** Each task's reported version: the newest on disk. */
  private readonly tasks = new Map<string, Task>()
  /** Versions made and not yet on disk: the newest per task. */
  private readonly unwritten = new Map<string, Task>()
  /** Indexes for list(): tasks not finished, and each owner's tasks, so a list reads only what it may answer. */
  private readonly unfinished = new Set<string>()
  private readonly byOwner = new Map<string, Set<string>>()
  /** Every task in list order (created, then id); null when it must be sorted again (a task adopted out of order). */
  private ordered: Task[] | null = []
  private readonly versions = new Map<string, number>()
  /** The version last on disk (reported and announced) per task: each version at most once, in order. Its state is the reported task's. */
  private readonly landedVersions = new Map<string, number>()
  /** Per task, the write of its newest version: answers once that version is on disk. */
  private readonly landing = new Map<string, Promise<Task>>()
  /** Per task, who waits for an announced state: each is called with every state announced. */
  private readonly stateWaiters = new Map<string, Set<(task: Task) => void>>()
  constructor(
    private readonly spoolRoot: string,
    private readonly events: EventLog,
    private readonly log?: Logger,
    private readonly writer = new RecordWriter(spoolRoot),
  ) {
    const { via, reason } = this.writer.via
    if (via !== 'addon') log?.warn({ reason }, 'task records are written with Node fs calls: the durable-write addon is not there')
  }

  /** Loads a task from the spool without announcing it. */
  adopt(task: Task): void {
    this.install(task)
    this.versions.set(task.id, 0)
    this.landedVersions.set(task.id, 0)
  }

  /**
   * Records a new task: its spool folder, empty output.log and task.json are made first, and only
   * then does the task exist for anyone else. A failure (disk full) leaves nothing behind.
   */
  async create(task: Task): Promise<Task> {
    if (this.tasks.has(task.id)) throw new TendError('TEND_ERR_INTERNAL', { detail: `task ${task.id} exists already` })
    try {
      await this.writer.write(task, { createDir: true })
    } catch (error) {
      await rm(taskDir(this.spoolRoot, task.id), { recursive: true, force: true }).catch(() => undefined)
      throw spoolWriteError(error, `recording the new task ${task.id}`)
    }
    this.install(task)
    this.versions.set(task.id, 1)
    this.landed(task, 1)
    return task
  }

  /**
   * Changes a task from its current version (compare-and-set): `change` sees the newest version
   * in memory and answers the next one (or null). Answers the task as it is reported once that
   * version is on disk and announced. A transition that does not apply to the current state
   * throws (TEND_ERR_ILLEGAL_TRANSITION), with nothing changed.
   */
  transition(id: string, change: Transition): Promise<Task> {
    const current = this.current(id)
    const next = change(current)
    if (next === null || next === current) return this.landing.get(id) ?? Promise.resolve(this.get(id))
    const version = (this.versions.get(id) ?? 0) + 1
    this.unwritten.set(id, next)
    this.versions.set(id, version)
    const landed = this.persist(id, version)
    this.landing.set(id, landed)
    void landed.then(
      () => this.landing.get(id) === landed && this.landing.delete(id),
      () => this.landing.get(id) === landed && this.landing.delete(id),
    )
    return landed
  }

  /**
   * Records a version made elsewhere (recovery, before the daemon serves): like transition(), but
   * from a task the caller read itself.
   */
  save(task: Task): Promise<Task> {
    return this.transition(task.id, () => task)
  }

  /**
   * Updates fields that are not a state change (live output size) without writing or announcing.
   * The supervisor patches every running task's size several times a second: a size that did not
   * change makes no new record (a copy of every running task each time is garbage the young
   * generation grows for).
   */
  patch(id: string, fields: Partial<Pick<Task, 'outputBytes'>>): void {
    const task = this.tasks.get(id)
    if (!task || fields.outputBytes === undefined) return
    // Object.assign, not a spread: see createQueuedTask (each copy would get a hidden class of its own).
    if (fields.outputBytes !== task.outputBytes) this.replace(task, Object.assign({}, task, fields))
    const unwritten = this.unwritten.get(id)
    if (unwritten && fields.outputBytes !== unwritten.outputBytes) this.unwritten.set(id, Object.assign({}, unwritten, fields))
  }

  /** The task as it is on disk: what a reader is answered. */
  get(id: string): Task {
    const task = this.tasks.get(id)
    if (!task) throw new TendError('TEND_ERR_TASK_NOT_FOUND', { id })
    return task
  }

  /** The task as it is on disk, if it exists. */
  find(id: string): Task | undefined {
    return this.tasks.get(id)
  }

  /** The task's newest version, on disk or not: what the supervisor decides from. */
  current(id: string): Task {
    return this.unwritten.get(id) ?? this.get(id)
  }

  /** The task's newest version, if it exists. */
  findCurrent(id: string): Task | undefined {
    return this.unwritten.get(id) ?? this.tasks.get(id)
  }

  /**
   * Tasks in the order they were created (then by id). Reads only the tasks the filter can answer:
   * the owner's, or the unfinished ones, or (all, no owner) the kept order as it is.
   */
  list(filter: ListFilter = {}): Task[] {
    if (filter.owner === undefined && filter.all) return [...this.inOrder()]
    const ids = filter.owner === undefined ? this.unfinished : (this.byOwner.get(filter.owner) ?? new Set<string>())
    const found: Task[] = []
    for (const id of ids) {
      const task = this.tasks.get(id)!
      if (filter.all || !isFinished(task)) found.push(task)
    }
    return found.sort(listOrder)
  }

  /** Forgets a task and publishes task.removed; the caller deletes its spool folder. */
  forget(id: string): void {
    const task = this.tasks.get(id)
    if (!task) return
    this.tasks.delete(id)
    this.unwritten.delete(id)
    this.unfinished.delete(id)
    const owned = this.byOwner.get(task.owner)
    owned?.delete(id)
    if (owned?.size === 0) this.byOwner.delete(task.owner)
    if (this.ordered) {
      const index = this.ordered.indexOf(task)
      if (index !== -1) this.ordered.splice(index, 1)
    }
    this.versions.delete(id)
    this.landedVersions.delete(id)
    this.landing.delete(id)
    this.events.publish('task.removed', task)
  }

  /** Resolves with the task once it has finished (on disk), or with its reported version after timeoutMs (or once `signal` aborts). */
  whenFinished(id: string, timeoutMs: number, signal?: AbortSignal): Promise<Task> {
    return this.whenState(id, isFinished, timeoutMs, signal)
  }

  /**
   * Resolves with the task once a state it is in on disk (announced) meets `reached`, or with its
   * reported version after timeoutMs, or as soon as `signal` aborts.
   */
  whenState(id: string, reached: (task: Task) => boolean, timeoutMs: number, signal?: AbortSignal): Promise<Task> {
    const task = this.get(id)
    if (reached(task) || timeoutMs <= 0 || signal?.aborted) return Promise.resolve(task)
    return new Promise((resolve) => {
      const waiters = this.stateWaiters.get(id) ?? new Set()
      this.stateWaiters.set(id, waiters)
      const settle = (version: Task) => {
        clearTimeout(timer)
        waiters.delete(check)
        signal?.removeEventListener('abort', abandon)
        resolve(version)
      }
      const check = (announced: Task) => {
        if (reached(announced)) settle(announced)
      }
      const abandon = () => settle(this.tasks.get(id) ?? task)
      const timer = setTimeout(abandon, timeoutMs)
      signal?.addEventListener('abort', abandon, { once: true })
      waiters.add(check)
    })
  }

  /** Resolves once the task's newest version is on disk (or its write failed). */
  settled(id: string): Promise<void> {
    const landing = this.landing.get(id)
    return landing ? landing.then(() => undefined, () => undefined) : Promise.resolve()
  }

  /** Resolves once every record write asked for so far has landed. */
  flush(): Promise<void> {
    return this.writer.flush()
  }

  /** Flushes, then stops the record writer's thread. */
  close(): Promise<void> {
    return this.writer.close()
  }

  /**
   * Writes the task's newest version (at least `version`) and reports and announces what landed.
   * A disk-full failure is retried, always with the newest version, until it lands; other
   * failures reject.
   */
  private async persist(id: string, version: number): Promise<Task> {
    let delayMs = 100
    let warned = false
    for (;;) {
      const latest = this.findCurrent(id)
      const latestVersion = this.versions.get(id) ?? version
      // Forgotten meanwhile (rm): nothing more to record.
      if (!latest) throw new TendError('TEND_ERR_TASK_NOT_FOUND', { id })
      try {
        await this.writer.write(latest)
        if (warned) this.log?.info({ taskId: id }, 'task record written after the disk had space again')
        this.landed(latest, latestVersion)
        return this.get(id)
      } catch (error) {
        const failure = spoolWriteError(error, `writing task.json of ${id}`)
        if (failure.code !== 'TEND_ERR_SPOOL_FULL') throw failure
        if (!warned) this.log?.error({ taskId: id, err: error }, 'no space for a task record; retrying until there is')
        warned = true
        await new Promise((resolve) => setTimeout(resolve, delayMs).unref())
        delayMs = Math.min(delayMs * 2, RETRY_MAX_MS)
      }
    }
  }

  /** Adds a task not known yet to the map and the indexes. */
  private install(task: Task): void {
    this.tasks.set(task.id, task)
    if (!isFinished(task)) this.unfinished.add(task.id)
    const owned = this.byOwner.get(task.owner) ?? new Set<string>()
    owned.add(task.id)
    this.byOwner.set(task.owner, owned)
    // New tasks are created in time order, so they nearly always go at the end.
    const last = this.ordered?.at(-1)
    if (this.ordered && (last === undefined || listOrder(last, task) < 0)) this.ordered.push(task)
    else this.ordered = null
  }

  /** Installs a task's next version in place of `current` (same id, owner and place in the order). */
  private replace(current: Task, next: Task): void {
    this.tasks.set(next.id, next)
    if (isFinished(next)) this.unfinished.delete(next.id)
    else this.unfinished.add(next.id)
    if (this.ordered) {
      const index = this.ordered.lastIndexOf(current)
      if (index !== -1) this.ordered[index] = next
      else this.ordered = null
    }
  }

  private inOrder(): Task[] {
    this.ordered ??= [...this.tasks.values()].sort(listOrder)
    return this.ordered
  }

  /**
   * A version is on disk: it becomes the reported one (with the live output size, until the task
   * has finished and its size is final) and is announced; each version at most once and in order,
   * each state once.
   */
  private landed(written: Task, version: number): void {
    const { id } = written
    const lastVersion = this.landedVersions.get(id)
    if (lastVersion !== undefined && lastVersion >= version) return
    this.landedVersions.set(id, version)
    if (this.versions.get(id) === version) this.unwritten.delete(id)
    const previous = this.tasks.get(id)!
    // A new task (no version landed before) is announced whatever it is; a later one when its state changed.
    const stateChanged = lastVersion === undefined || previous.state !== written.state
    // A running task's output only grows: the size patched meanwhile may be ahead of the record's.
    const live = previous.outputBytes
    const task = isFinished(written) || live <= written.outputBytes ? written : Object.assign({}, written, { outputBytes: live })
    this.replace(previous, task)
    if (!stateChanged) return
    this.events.publishState(task)
    const waiters = this.stateWaiters.get(task.id)
    if (!waiters) return
    for (const waiter of [...waiters]) waiter(task)
    if (waiters.size === 0 || isFinished(task)) this.stateWaiters.delete(task.id)
  }
}
