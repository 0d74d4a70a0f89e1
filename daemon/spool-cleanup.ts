import type { Logger } from 'pino'
import { isFinished, TendError, type Task } from '../protocol/index.js'
import { removeTaskDir } from '../spool/index.js'
import type { TaskStore } from './task-store.js'

/** Room a task's record takes besides its output, for quota arithmetic. */
const RECORD_OVERHEAD_BYTES = 1024

/** Deletes finished tasks: on request, by age, and when the spool passes its quota. */
export class SpoolCleanup {
  constructor(
    private readonly spoolRoot: string,
    private readonly quotaBytes: number,
    private readonly store: TaskStore,
    private readonly log: Logger,
  ) {}

  async remove(id: string): Promise<number> {
    const task = this.store.get(id)
    if (!isFinished(task)) throw new TendError('TEND_ERR_TASK_NOT_FINISHED', { id, state: task.state })
    this.store.forget(id)
    return removeTaskDir(this.spoolRoot, id)
  }

  /** Removes finished tasks that ended more than olderThanMs ago. */
  async removeOlderThan(olderThanMs: number, owner: string | null = null, now = Date.now()): Promise<{ removed: string[]; freedBytes: number }> {
    const cutoff = now - olderThanMs
    const old = this.store.list({ all: true, owner: owner ?? undefined }).filter((task) => isFinished(task) && task.endedAt !== null && Date.parse(task.endedAt) <= cutoff)
    return this.removeAll(old)
  }

  usedBytes(): number {
    return this.store.list({ all: true }).reduce((sum, task) => sum + task.outputBytes + RECORD_OVERHEAD_BYTES, 0)
  }

  /** Deletes the oldest finished tasks until the spool fits its quota; never touches a running task. */
  async enforceQuota(): Promise<string[]> {
    let used = this.usedBytes()
    if (used <= this.quotaBytes) return []
    const finished = this.store
      .list({ all: true })
      .filter(isFinished)
      .sort((a, b) => (a.endedAt ?? '').localeCompare(b.endedAt ?? ''))
    const victims: Task[] = []
    for (const task of finished) {
      if (used <= this.quotaBytes) break
      victims.push(task)
      used -= task.outputBytes + RECORD_OVERHEAD_BYTES
    }
    const { removed, freedBytes } = await this.removeAll(victims)
    this.log.warn({ removed: removed.length, freedBytes, quotaBytes: this.quotaBytes }, 'spool quota enforced')
    return removed
  }

  private async removeAll(tasks: Task[]): Promise<{ removed: string[]; freedBytes: number }> {
    const removed: string[] = []
    let freedBytes = 0
    for (const task of tasks) {
      this.store.forget(task.id)
      freedBytes += await removeTaskDir(this.spoolRoot, task.id)
      removed.push(task.id)
    }
    return { removed, freedBytes }
  }
}
