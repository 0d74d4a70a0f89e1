import { setTimeout as delay } from 'node:timers/promises'
import { isFinished, isTendError, type Task } from '../../client/index.js'
import { connectTasks, type TaskServiceOptions } from '../../client/connect-tasks.js'
import type { TaskService } from '../../client/task-service.js'
import { noticeText } from './notice.js'
import { chooseWorkingFolder, type FolderCandidate } from './working-folder.js'

/** Hands a completion notice to the agent; answers false when it could not be delivered. */
export type NoticeSink = (text: string, task: Task) => boolean

const RESUBSCRIBE_DELAY_MS = 500

/**
 * One agent's view of tend: a client scoped to the agent as owner, a read cursor per task, and
 * completion notices delivered exactly once — after the task ended, only when the agent has not
 * already seen the ending (read to the end, waited on it, killed it). Notices that could not be
 * delivered wait for the agent's next tend tool result.
 */
export class OwnerSession {
  readonly client: TaskService
  private readonly cursors = new Map<string, number>()
  private readonly seenEndings = new Set<string>()
  private readonly noticed = new Set<string>()
  private readonly watching = new Map<string, number>()
  private readonly endedWhileWatched = new Map<string, Task>()
  private readonly pending: string[] = []
  /** Endings from this time on are this session's to announce (a resync finds them by it). */
  private openedAt = Date.now()
  private readonly stopping = new AbortController()
  private subscription: Promise<void> | undefined

  constructor(
    readonly owner: string,
    clientOptions: TaskServiceOptions,
    private readonly sink: NoticeSink,
    private readonly workingFolders: () => Promise<readonly FolderCandidate[]> = () => Promise.resolve([]),
  ) {
    this.client = connectTasks(clientOptions, owner)
  }

  /** Subscribes to this owner's events; resolves once endings from now on will be seen. */
  async open(): Promise<void> {
    if (this.subscription) return
    const { events } = await this.client.status()
    this.openedAt = Date.now()
    this.subscription = this.follow(events.daemonId, events.lastSeq)
  }

  /** Where a call without cwd runs: the first usable folder its host names, else the process's. */
  async defaultCwd(): Promise<FolderCandidate> {
    return chooseWorkingFolder(await this.workingFolders())
  }

  cursor(taskId: string): number {
    return this.cursors.get(taskId) ?? 0
  }

  advance(taskId: string, next: number): void {
    this.cursors.set(taskId, Math.max(next, this.cursor(taskId)))
  }

  /** The task's output was cut back below this agent's place: it reads it again from its start. */
  rewind(taskId: string): void {
    this.cursors.set(taskId, 0)
  }

  /** The agent saw this task end (or will, in the call that is running): no notice for it. */
  markSeen(taskId: string): void {
    this.seenEndings.add(taskId)
  }

  /**
   * Runs a call that looks at a task; an ending announced meanwhile is decided after the call,
   * once it is known whether the call itself showed the ending to the agent.
   */
  async watch<T>(taskId: string, call: () => Promise<T>): Promise<T> {
    this.watching.set(taskId, (this.watching.get(taskId) ?? 0) + 1)
    try {
      return await call()
    } finally {
      const left = (this.watching.get(taskId) ?? 1) - 1
      if (left > 0) this.watching.set(taskId, left)
      else {
        this.watching.delete(taskId)
        const ended = this.endedWhileWatched.get(taskId)
        this.endedWhileWatched.delete(taskId)
        if (ended) this.announce(ended)
      }
    }
  }

  /** Notices that could not be delivered; the caller adds them to its tool result. */
  takePendingNotices(): string[] {
    return this.pending.splice(0, this.pending.length)
  }

  /**
   * The agent session ends (agent disposed): stops every running or queued task of this owner whose
   * lifetime is `owner`, recorded as stopped by `session-end`. `persistent` tasks run on, visible to
   * the operator and to a later session of the same owner, which gets their notices.
   */
  async stopTasks(): Promise<void> {
    const tasks = await this.client.list()
    await Promise.all(
      tasks
        // A daemon older than lifetimes sends no lifetime: every task is the owner's then.
        .filter((task) => (task.lifetime ?? 'owner') === 'owner')
        .map((task) => {
          this.markSeen(task.id)
          return this.client.kill(task.id, { reason: 'its agent was disposed', stoppedBy: 'session-end' }).catch(() => undefined)
        }),
    )
  }

  async close(): Promise<void> {
    this.stopping.abort()
    await this.subscription?.catch(() => undefined)
    this.client.close()
  }

  private announce(task: Task): void {
    if (this.seenEndings.has(task.id) || this.noticed.has(task.id)) return
    if (this.watching.has(task.id)) {
      this.endedWhileWatched.set(task.id, task)
      return
    }
    this.noticed.add(task.id)
    const text = noticeText(task)
    let delivered = false
    try {
      delivered = this.sink(text, task)
    } catch {
      delivered = false
    }
    if (!delivered) this.pending.push(text)
  }

  /**
   * After an events gap or at a new daemon: every task that ended since the session opened, even
   * one this session never had an event of (its daemon died before streaming it), is announced
   * (once, as always). Answers the daemon and the seq to follow from.
   */
  private async resync(): Promise<{ daemonId: string; lastSeq: number }> {
    const { events } = await this.client.status()
    for (const task of await this.client.list({ all: true })) {
      if (isFinished(task) && task.endedAt !== null && Date.parse(task.endedAt) >= this.openedAt) this.announce(task)
    }
    return events
  }

  private async follow(daemonId: string, since: number): Promise<void> {
    let currentDaemon = daemonId
    let lastSeq = since
    while (!this.stopping.signal.aborted) {
      try {
        for await (const event of this.client.events({ since: lastSeq, signal: this.stopping.signal })) {
          // The stream went on at a new daemon: one may have come and gone unseen in between.
          if (event.daemonId !== currentDaemon) await this.resync()
          currentDaemon = event.daemonId
          lastSeq = event.seq
          if (event.type !== 'task.removed' && isFinished(event.task)) this.announce(event.task)
        }
      } catch (error) {
        // Events were lost to this reader (it fell behind the daemon's window): resync from the
        // task list, then follow from the newest event. Otherwise the stream broke (the daemon
        // restarting): pick up where it left off.
        if (isTendError(error, 'TEND_ERR_EVENTS_GAP')) {
          const resynced = await this.resync().catch(() => undefined)
          if (resynced !== undefined) {
            currentDaemon = resynced.daemonId
            lastSeq = resynced.lastSeq
            continue
          }
        }
      }
      if (this.stopping.signal.aborted) return
      // Follow again only once a daemon answers. A new one (or several, each gone before this
      // session saw it) recorded endings this session has no event of: the task list has them.
      for (;;) {
        await delay(RESUBSCRIBE_DELAY_MS, undefined, { signal: this.stopping.signal }).catch(() => undefined)
        if (this.stopping.signal.aborted) return
        const status = await this.client.status().catch(() => undefined)
        if (!status) continue
        if (status.events.daemonId !== currentDaemon) {
          const resynced = await this.resync().catch(() => undefined)
          if (resynced === undefined) continue
          currentDaemon = resynced.daemonId
          lastSeq = resynced.lastSeq
        }
        break
      }
    }
  }
}
