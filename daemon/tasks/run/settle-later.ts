/**
 * A result promised only to whoever asks: its promise is made on the first `promise` call, and
 * settles with the result whether that comes before or after. A running task's final record is
 * one; most tasks end with nobody waiting, and a daemon holds thousands of them running.
 */
export class SettleLater<T> {
  private outcome: { ok: true; value: T } | { ok: false; error: unknown } | undefined
  private waiting: { promise: Promise<T>; resolve: (value: T) => void; reject: (error: unknown) => void } | undefined

  get promise(): Promise<T> {
    if (this.waiting) return this.waiting.promise
    if (this.outcome) return this.outcome.ok ? Promise.resolve(this.outcome.value) : rejected(this.outcome.error)
    let resolve!: (value: T) => void
    let reject!: (error: unknown) => void
    const promise = new Promise<T>((resolvePromise, rejectPromise) => {
      resolve = resolvePromise
      reject = rejectPromise
    })
    // Whoever asked awaits it; a rejection nobody awaits any more is no unhandled rejection.
    promise.catch(() => undefined)
    this.waiting = { promise, resolve, reject }
    return promise
  }

  resolve(value: T): void {
    if (this.outcome) return
    this.outcome = { ok: true, value }
    this.waiting?.resolve(value)
  }

  reject(error: unknown): void {
    if (this.outcome) return
    this.outcome = { ok: false, error }
    this.waiting?.reject(error)
  }
}

function rejected<T>(error: unknown): Promise<T> {
  const promise = Promise.reject<T>(error)
  promise.catch(() => undefined)
  return promise
}
