import { watch, type FSWatcher } from 'node:fs'

interface Waiter {
  wake: () => void
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
   * signal aborts, or timeoutMs passes — whichever comes first. Callers re-check the file after.
   */
  waitForChange(taskId: string, file: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const waiter: Waiter = { wake: () => finish() }
      const finish = () => {
        clearTimeout(timer)
        signal?.removeEventListener('abort', finish)
        const set = this.waiters.get(taskId)
        set?.delete(waiter)
        if (set && set.size === 0) {
          this.waiters.delete(taskId)
          this.disarm(taskId)
        }
        resolve()
      }
      const timer = setTimeout(finish, timeoutMs)
      signal?.addEventListener('abort', finish, { once: true })
      const set = this.waiters.get(taskId) ?? new Set<Waiter>()
      set.add(waiter)
      this.waiters.set(taskId, set)
      this.arm(taskId, file)
    })
  }

  /** Wakes every reader waiting on the task (its state changed). */
  wakeAll(taskId: string): void {
    for (const waiter of [...(this.waiters.get(taskId) ?? [])]) waiter.wake()
  }

  close(): void {
    for (const taskId of [...this.waiters.keys()]) this.wakeAll(taskId)
  }

  private arm(taskId: string, file: string): void {
    if (this.watchers.has(taskId)) return
    let watcher: FSWatcher
    try {
      watcher = watch(file, { persistent: false }, () => {
        this.disarm(taskId)
        this.wakeAll(taskId)
      })
    } catch {
      // No output.log yet (queued task): the state change wakes the readers instead.
      return
    }
    watcher.on('error', () => {
      this.disarm(taskId)
      this.wakeAll(taskId)
    })
    this.watchers.set(taskId, watcher)
  }

  private disarm(taskId: string): void {
    this.watchers.get(taskId)?.close()
    this.watchers.delete(taskId)
  }
}
