import { watch, type FSWatcher } from 'node:fs'
import { stat } from 'node:fs/promises'

interface Waiter {
  wake: (reason: WakeReason) => void
}

/** Why a wait ended: the file changed, the task's state changed (wakeAll), the time was up, or the reader left. */
export type WakeReason = 'changed' | 'woken' | 'timeout' | 'aborted'

export interface WaitForChangeOptions {
  /**
   * The size of output.log the caller saw before it decided to wait, in bytes. Bytes written
   * between that look and the watch being armed raise no event: the size is looked at again once
   * the watch is armed, and another size ends the wait at once.
   */
  sizeSeen: number
  /**
   * Whether the task has ended since the caller looked at its state. A task that ends between
   * that look and the wait wakes nobody (wakeAll finds no waiter yet): this is asked once the
   * waiter is registered, and true ends the wait at once.
   */
  endedSince: () => boolean
  /** The longest wait, in milliseconds. */
  timeoutMs: number
  signal?: AbortSignal
  /** The size of output.log now (default: by its path; a stat opens nothing, so a FIFO there does not block it). */
  sizeNow?: () => Promise<number>
}

/**
 * Wakes long-polling readers when a task's output.log changes. A file watch is armed only while
 * somebody waits and dropped at its first event: a watch left on a flooded file costs hundreds
 * of thousands of events (docs/architecture.md).
 */
export class OutputWatch {
  private readonly waiters = new Map<string, Set<Waiter>>()
  private readonly watchers = new Map<string, FSWatcher>()

  /**
   * Resolves after the output file changes, `wakeAll(taskId)` is called (the task ended), the
   * signal aborts, or timeoutMs passes — whichever comes first — answering which. Callers
   * re-check the file after.
   */
  waitForChange(taskId: string, file: string, options: WaitForChangeOptions): Promise<WakeReason> {
    const { signal } = options
    return new Promise((resolve) => {
      let done = false
      const finish = (reason: WakeReason) => {
        if (done) return
        done = true
        clearTimeout(timer)
        signal?.removeEventListener('abort', onAbort)
        const set = this.waiters.get(taskId)
        set?.delete(waiter)
        if (set && set.size === 0) {
          this.waiters.delete(taskId)
          this.disarm(taskId)
        }
        resolve(reason)
      }
      const waiter: Waiter = { wake: finish }
      const onAbort = () => finish('aborted')
      const timer = setTimeout(() => finish('timeout'), options.timeoutMs)
      if (signal?.aborted) return finish('aborted')
      signal?.addEventListener('abort', onAbort, { once: true })
      const set = this.waiters.get(taskId) ?? new Set<Waiter>()
      set.add(waiter)
      this.waiters.set(taskId, set)
      if (options.endedSince()) return finish('woken')
      this.arm(taskId, file)
      // Armed first, looked at second: a write before this look shows in the size, one after it
      // raises an event. A file that is gone wakes the reader too, to find that out.
      ;(options.sizeNow ?? (async () => (await stat(file)).size))().then(
        (size) => {
          if (size !== options.sizeSeen) finish('changed')
        },
        () => finish('changed'),
      )
    })
  }

  /** Wakes every reader waiting on the task (its state changed). */
  wakeAll(taskId: string): void {
    for (const waiter of [...(this.waiters.get(taskId) ?? [])]) waiter.wake('woken')
  }

  close(): void {
    for (const taskId of [...this.waiters.keys()]) this.wakeAll(taskId)
  }

  private arm(taskId: string, file: string): void {
    if (this.watchers.has(taskId)) return
    let watcher: FSWatcher
    try {
      watcher = watch(file, { persistent: false }, () => this.fire(taskId))
    } catch {
      // No output.log (it was deleted): the look that follows the arming wakes the reader.
      return
    }
    watcher.on('error', () => this.fire(taskId))
    this.watchers.set(taskId, watcher)
  }

  private fire(taskId: string): void {
    this.disarm(taskId)
    for (const waiter of [...(this.waiters.get(taskId) ?? [])]) waiter.wake('changed')
  }

  private disarm(taskId: string): void {
    this.watchers.get(taskId)?.close()
    this.watchers.delete(taskId)
  }
}
