import { isFinished, TendError, type Task } from '../protocol/index.js'
import { RecordWriter } from '../spool/index.js'
import type { EventLog } from './event-log.js'

export interface ListFilter {
  /** Include finished tasks. */
  all?: boolean
  owner?: string
}

/**
 * The daemon's tasks: held in memory, each change written to its task.json (one write at a time
 * per task, in order) and announced on the event log when the state changed.
 */
export class TaskStore {
  private readonly tasks = new Map<string, Task>()
  private readonly finishWaiters = new Map<string, Set<(task: Task) => void>>()

  private readonly writer: RecordWriter

  constructor(
    spoolRoot: string,
    private readonly events: EventLog,
  ) {
    this.writer = new RecordWriter(spoolRoot)
    this.writer.start()
  }

  /** Loads a task from the spool without announcing it. */
  adopt(task: Task): void {
    this.tasks.set(task.id, task)
  }

  /**
   * Records a new version of a task: persists it, and publishes an event if its state changed.
   * `createDir` (a new task) makes its spool folder and empty output.log first.
   */
  async save(task: Task, options: { createDir?: boolean } = {}): Promise<Task> {
    const previous = this.tasks.get(task.id)
    this.tasks.set(task.id, task)
    await this.persist(task, options.createDir === true)
    if (previous?.state !== task.state) this.events.publishState(task)
    if (isFinished(task)) {
      for (const waiter of this.finishWaiters.get(task.id) ?? []) waiter(task)
      this.finishWaiters.delete(task.id)
    }
    return task
  }

  /** Updates fields that are not a state change (live output size) without writing or announcing. */
  patch(id: string, fields: Partial<Pick<Task, 'outputBytes'>>): void {
    const task = this.tasks.get(id)
    if (task) this.tasks.set(id, { ...task, ...fields } as Task)
  }

  get(id: string): Task {
    const task = this.tasks.get(id)
    if (!task) throw new TendError('TEND_ERR_TASK_NOT_FOUND', { id })
    return task
  }

  find(id: string): Task | undefined {
    return this.tasks.get(id)
  }

  list(filter: ListFilter = {}): Task[] {
    return [...this.tasks.values()]
      .filter((task) => (filter.all || !isFinished(task)) && (filter.owner === undefined || task.owner === filter.owner))
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id))
  }

  /** Forgets a task and publishes task.removed; the caller deletes its spool folder. */
  forget(id: string): void {
    const task = this.tasks.get(id)
    if (!task) return
    this.tasks.delete(id)
    this.events.publish('task.removed', task)
  }

  /** Resolves with the task once it has finished, or with its current version after timeoutMs. */
  whenFinished(id: string, timeoutMs: number): Promise<Task> {
    const task = this.get(id)
    if (isFinished(task) || timeoutMs <= 0) return Promise.resolve(task)
    return new Promise((resolve) => {
      const waiters = this.finishWaiters.get(id) ?? new Set()
      this.finishWaiters.set(id, waiters)
      const done = (finished: Task) => {
        clearTimeout(timer)
        resolve(finished)
      }
      const timer = setTimeout(() => {
        waiters.delete(done)
        resolve(this.tasks.get(id) ?? task)
      }, timeoutMs)
      waiters.add(done)
    })
  }

  /** Resolves once every record write asked for so far has landed. */
  flush(): Promise<void> {
    return this.writer.flush()
  }

  /** Flushes, then stops the record writer's thread. */
  close(): Promise<void> {
    return this.writer.close()
  }

  private async persist(task: Task, createDir: boolean): Promise<void> {
    // One writer thread takes the writes in order, so a task's records land in the order they were made.
    try {
      await this.writer.write(task, { createDir })
    } catch (error) {
      throw new TendError('TEND_ERR_SPOOL_IO', { detail: `writing task.json of ${task.id}: ${(error as Error).message}` }, { cause: error })
    }
  }
}
