import PQueue from 'p-queue'

type Job = () => Promise<void>

/**
 * Admits jobs under two limits: a global concurrency (a p-queue) and a cap per owner. A job whose
 * owner is at its cap waits in that owner's line, so one busy owner cannot hold every slot.
 */
export class Scheduler {
  private readonly queue: PQueue
  private readonly waiting = new Map<string, Job[]>()
  private readonly admitted = new Map<string, number>()

  constructor(
    concurrency: number,
    private readonly perOwnerConcurrency: number,
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
    void this.queue.add(async () => {
      try {
        await job()
      } finally {
        this.release(owner)
      }
    })
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
