type Job = () => Promise<void>

/** Told of a job that threw: the job is over and its slot is free again. */
export type JobFailureHandler = (error: unknown, owner: string) => void

interface Admitted {
  owner: string
  job: Job
}

/**
 * Admits jobs under two limits: a global concurrency and a cap per owner. A job whose owner is at
 * its cap waits in that owner's line, so one busy owner cannot hold every slot; an admitted job
 * waits for a global slot in first-come order.
 *
 * A running job costs one promise reaction: a running task is a job, and a daemon runs thousands
 * (no queue library's per-job closures and suspended async functions).
 *
 * A job that throws never leaves the scheduler: its error goes to `onJobFailed` (by default a
 * process warning, on stderr), its slot is released and the next job runs. Nothing a job does can
 * become an unhandled rejection, which would end the daemon.
 */
export class Scheduler {
  private readonly waiting = new Map<string, Job[]>()
  private readonly admitted = new Map<string, number>()
  /** Admitted jobs waiting for a global slot, oldest first. */
  private readonly ready: Admitted[] = []
  private runningCount = 0
  private idleWaiters: Array<() => void> = []

  constructor(
    private readonly concurrency: number,
    private readonly perOwnerConcurrency: number,
    private readonly onJobFailed: JobFailureHandler = warnJobFailed,
  ) {}

  submit(owner: string, job: Job): void {
    if ((this.admitted.get(owner) ?? 0) < this.perOwnerConcurrency) {
      this.admit(owner, job)
      this.startReady()
      return
    }
    const line = this.waiting.get(owner) ?? []
    line.push(job)
    this.waiting.set(owner, line)
  }

  /** Resolves when nothing is running or waiting. */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve()
    return new Promise((resolve) => this.idleWaiters.push(resolve))
  }

  private isIdle(): boolean {
    return this.runningCount === 0 && this.ready.length === 0
  }

  private admit(owner: string, job: Job): void {
    this.admitted.set(owner, (this.admitted.get(owner) ?? 0) + 1)
    this.ready.push({ owner, job })
  }

  private startReady(): void {
    while (this.runningCount < this.concurrency && this.ready.length > 0) {
      const next = this.ready.shift()!
      this.runningCount++
      this.start(next.owner, next.job)
    }
  }

  private start(owner: string, job: Job): void {
    let settled: Promise<void>
    try {
      settled = job()
    } catch (error) {
      settled = Promise.reject(error)
    }
    Promise.resolve(settled).then(
      () => this.finish(owner),
      (error: unknown) => {
        this.report(error, owner)
        this.finish(owner)
      },
    )
  }

  private report(error: unknown, owner: string): void {
    try {
      this.onJobFailed(error, owner)
    } catch {
      // The reporter failed too; there is no one left to tell.
    }
  }

  private finish(owner: string): void {
    this.runningCount--
    const count = (this.admitted.get(owner) ?? 1) - 1
    if (count === 0) this.admitted.delete(owner)
    else this.admitted.set(owner, count)
    const line = this.waiting.get(owner)
    const next = line?.shift()
    if (line && line.length === 0) this.waiting.delete(owner)
    if (next) this.admit(owner, next)
    this.startReady()
    if (!this.isIdle()) return
    const waiters = this.idleWaiters
    this.idleWaiters = []
    for (const resolve of waiters) resolve()
  }
}

function warnJobFailed(error: unknown, owner: string): void {
  const detail = error instanceof Error ? (error.stack ?? error.message) : String(error)
  process.emitWarning(`a scheduled job of owner ${owner} failed: ${detail}`, { code: 'TEND_JOB_FAILED' })
}
