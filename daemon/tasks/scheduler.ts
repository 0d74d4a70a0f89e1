import PQueue from 'p-queue'

type Job = () => Promise<void>

/** Told of a job that threw: the job is over and its slot is free again. */
export type JobFailureHandler = (error: unknown, owner: string) => void

/**
 * Admits jobs under two limits: a global concurrency (a p-queue) and a cap per owner. A job whose
 * owner is at its cap waits in that owner's line, so one busy owner cannot hold every slot.
 *
 * A job that throws never leaves the scheduler: its error goes to `onJobFailed` (by default a
 * process warning, on stderr), its slot is released and the next job runs. Nothing a job does can
 * become an unhandled rejection, which would end the daemon.
 */
export class Scheduler {
  private readonly queue: PQueue
  private readonly waiting = new Map<string, Job[]>()
  private readonly admitted = new Map<string, number>()

  constructor(
    concurrency: number,
    private readonly perOwnerConcurrency: number,
    private readonly onJobFailed: JobFailureHandler = warnJobFailed,
  ) {
    this.queue = new PQueue({ concurrency })
  }

  submit(owner: string, job: Job): void {
    if ((this.admitted.get(owner) ?? 0) < this.perOwnerConcurrency) {
      this.admit(owner, job)
      return
    }
    const line = this.waiting.get(owner) ?? []
    line.push(job)
    this.waiting.set(owner, line)
  }

  /** Resolves when nothing is running or waiting. */
  async idle(): Promise<void> {
    await this.queue.onIdle()
  }

  private admit(owner: string, job: Job): void {
    this.admitted.set(owner, (this.admitted.get(owner) ?? 0) + 1)
    const run = async () => {
      try {
        await job()
      } catch (error) {
        this.report(error, owner)
      } finally {
        this.release(owner)
      }
    }
    // run() cannot reject; the catch is for p-queue itself (a bug there must not end the daemon either).
    this.queue.add(run).catch((error: unknown) => this.report(error, owner))
  }

  private report(error: unknown, owner: string): void {
    try {
      this.onJobFailed(error, owner)
    } catch {
      // The reporter failed too; there is no one left to tell.
    }
  }

  private release(owner: string): void {
    const count = (this.admitted.get(owner) ?? 1) - 1
    if (count === 0) this.admitted.delete(owner)
    else this.admitted.set(owner, count)
    const line = this.waiting.get(owner)
    const next = line?.shift()
    if (line && line.length === 0) this.waiting.delete(owner)
    if (next) this.admit(owner, next)
  }
}

function warnJobFailed(error: unknown, owner: string): void {
  const detail = error instanceof Error ? (error.stack ?? error.message) : String(error)
  process.emitWarning(`a scheduled job of owner ${owner} failed: ${detail}`, { code: 'TEND_JOB_FAILED' })
}
