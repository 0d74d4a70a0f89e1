import type { Logger } from 'pino'
import { backoffMs, isFinished, TendError, type Task, type TaskEvent } from '../../protocol/index.js'
import { removeTaskDir } from '../../spool/index.js'
import { RecordWriter } from './record-writer.js'
import type { EventLog } from './event-log.js'
import { isNoSpace, spoolProblem, spoolWriteError } from './spool-errors.js'
import { SpoolReserve } from './spool-reserve.js'

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

/** How long a record that could not be written (disk full) waits before the next try: first, then at most (doubling between). */
const RETRY_FIRST_MS = 100
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
 * one), and each is reported and announced, in order, once it is there. A record the disk refuses
 * for lack of space spends the spool's reserve (spool-reserve.ts) and lands. One that still cannot
 * be written (no reserve left, a read-only spool, an I/O error) is held: reported and announced
 * from memory, so that nothing waits on it, and retried, always the newest version, until it lands;
 * `spoolState()` says so meanwhile. The live output size is not a version: it is patched into both.
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
  /** Per task, the version reported from memory because it could not be written (yet). */
  private readonly held = new Map<string, number>()
  /** What the last failed record write said of the spool as a whole; null once a record lands. */
  private problem: string | null = null
  constructor(
    private readonly spoolRoot: string,
    private readonly events: EventLog,
    private readonly log?: Logger,
    private readonly writer = new RecordWriter(spoolRoot),
    private readonly reserve: SpoolReserve = new SpoolReserve('', 0),
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
    // The room left is the running tasks' endings' until the reserve is made again.
    if (!this.reserve.isHeld)
      throw new TendError('TEND_ERR_SPOOL_FULL', {
        detail:
          `recording the new task ${task.id}: the spool's reserve (${this.reserve.bytes}` +
          ` bytes) was spent on a full disk and there is not yet room to make it again`,
      })
    try {
      await this.writer.write(task, { createDir: true })
    } catch (error) {
      await removeTaskDir(this.spoolRoot, task.id).catch(() => undefined)
      throw spoolWriteError(error, `recording the new task ${task.id}`)
    }
    this.install(task)
    this.versions.set(task.id, 1)
    this.landed(task, 1, true)
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

  /** Every event announced from now on, in order: each once its version is on disk (a removal once it is forgotten). */
  subscribe(listener: (event: TaskEvent) => void): () => void {
    return this.events.subscribe(listener)
  }

  /** Room was freed on the spool's disk (a task folder removed): a spent reserve is made again now if it fits. */
  roomFreed(): void {
    this.reserve.restoreSoon()
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
    this.held.delete(id)
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

  /** Whether records can be written now, and how many are held in memory meanwhile; what `tend status` shows. */
  spoolState(): { writable: boolean; problem: string | null; heldRecords: number; reserveBytes: number; reserveHeld: boolean } {
    return {
      writable: this.problem === null,
      problem: this.problem,
      heldRecords: this.held.size,
      reserveBytes: this.reserve.bytes,
      reserveHeld: this.reserve.isHeld,
    }
  }

  /** Gives up the spool's reserve (a keeper's exit file needs the room); answers whether it freed anything. */
  releaseReserve(): Promise<boolean> {
    return this.reserve.release()
  }

  /** Resolves once the task's newest version is reported: on disk, or held in memory when it cannot be written. */
  settled(id: string): Promise<void> {
    const landing = this.landing.get(id)
    return landing
      ? landing.then(
          () => undefined,
          () => undefined,
        )
      : Promise.resolve()
  }

  /** Resolves once every record write asked for so far has landed. */
  flush(): Promise<void> {
    return this.writer.flush()
  }

  /** Flushes, then stops the record writer's thread; records still held in memory are named in the log (the next daemon reads what is on disk). */
  async close(): Promise<void> {
    this.reserve.close()
    await this.writer.close()
    if (this.held.size > 0)
      this.log?.error({ taskIds: [...this.held.keys()], problem: this.problem }, 'task records held in memory could not be written before the daemon stopped')
  }

  /**
   * Writes the task's newest version (at least `version`) and reports and announces what landed.
   * A write the disk refuses for lack of space first spends the spool's reserve and tries again at
   * once. One that still fails (a full disk without reserve, a read-only spool, an I/O error) does
   * not hold anyone up: the version is reported and announced from memory (held), so kill, rm,
   * stop, wait and every reader go on, and it is written, always the newest, as soon as it can be.
   * Answers once the version is reported, on disk or held.
   */
  private persist(id: string, version: number): Promise<Task> {
    return new Promise((resolve, reject) => {
      let answered = false
      const answer = (task: Task) => {
        if (answered) return
        answered = true
        resolve(task)
      }
      this.writeUntilLanded(id, version, answer).then(answer, (error: unknown) => {
        if (!answered) reject(error)
      })
    })
  }

  private async writeUntilLanded(id: string, version: number, reportHeld: (task: Task) => void): Promise<Task> {
    let failures = 0
    for (;;) {
      const latest = this.findCurrent(id)
      const latestVersion = this.versions.get(id) ?? version
      // Forgotten meanwhile (rm): nothing more to record.
      if (!latest) throw new TendError('TEND_ERR_TASK_NOT_FOUND', { id })
      try {
        await this.writer.write(latest)
        if (failures > 0) this.log?.info({ taskId: id }, 'task record written after the spool could take it again')
        this.setProblem(null)
        this.landed(latest, latestVersion, true)
        return this.get(id)
      } catch (error) {
        // A task forgotten while its write was under way (rm of a held ending): its folder is gone.
        if (!this.tasks.has(id)) throw new TendError('TEND_ERR_TASK_NOT_FOUND', { id })
        if (isNoSpace(error) && (await this.reserve.release())) continue
        const problem = spoolProblem(error)
        if (problem) this.setProblem(problem)
        if (failures === 0)
          this.log?.error({ taskId: id, err: error, problem }, 'a task record could not be written; it is held in memory and written when it can be')
        failures++
        this.landed(latest, latestVersion, false)
        reportHeld(this.get(id))
        await new Promise((resolve) => setTimeout(resolve, backoffMs(failures - 1, RETRY_FIRST_MS, RETRY_MAX_MS)).unref())
      }
    }
  }

  /** Each change of what is wrong with the spool is an event (once per change, not per retry). */
  private setProblem(problem: string | null): void {
    if (problem === this.problem) return
    this.problem = problem
    this.events.publishSpool(problem === null, problem)
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
   * A version is on disk (durable), or could not be written and is held in memory: it becomes the
   * reported one (with the live output size, until the task has finished and its size is final)
   * and is announced; each version at most once and in order, each state once. A held version
   * stays to be written: it leaves `unwritten` only once it is on disk.
   */
  private landed(written: Task, version: number, durable: boolean): void {
    const { id } = written
    if (durable) {
      if ((this.held.get(id) ?? Infinity) <= version) this.held.delete(id)
      if (this.versions.get(id) === version) this.unwritten.delete(id)
    } else if ((this.held.get(id) ?? -1) < version) this.held.set(id, version)
    const lastVersion = this.landedVersions.get(id)
    if (lastVersion !== undefined && lastVersion >= version) return
    this.landedVersions.set(id, version)
    const previous = this.tasks.get(id)!
    // A new task (no version landed before) is announced whatever it is; a later one when its state changed.
    const stateChanged = lastVersion === undefined || previous.state !== written.state
    // A running task's output only grows: the size patched meanwhile may be ahead of the record's.
    const live = previous.outputBytes
    const task = isFinished(written) || live <= written.outputBytes ? written : Object.assign({}, written, { outputBytes: live })
    this.replace(previous, task)
    // Readiness settled while the task runs (an ending that settles it says so in its own event).
    const readied = previous.ready === null && task.ready !== null && task.ready !== undefined && !stateChanged
    if (!stateChanged && !readied) return
    if (readied) this.events.publish('task.ready', task)
    else this.events.publishState(task)
    const waiters = this.stateWaiters.get(task.id)
    if (!waiters) return
    for (const waiter of [...waiters]) waiter(task)
    if (waiters.size === 0 || isFinished(task)) this.stateWaiters.delete(task.id)
  }
}
