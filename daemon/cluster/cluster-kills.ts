import { isFinished, REQUESTED_STOPS, type ClusterKill } from '../../protocol/index.js'
import type { WorkerDeps } from './worker-deps.js'
import { normalizeSignal } from '../tasks/input/signals.js'
import { logClusterChange } from '../http/audit.js'

/** How long a kill of a task this worker does not have is kept, in case its job is being taken here. */
const EARLY_KILL_KEEP_MS = 60_000

/**
 * Kills published on the cluster's kill channel. Every worker hears each one: the worker holding
 * the task stops it. A kill can also come while a worker is taking the task's job, before its task
 * exists here; such a kill is kept a minute, and the job's task is stopped as soon as it is
 * admitted (`takeEarly`), so that no kill is lost to that moment.
 */
export class ClusterKills {
  private readonly early = new Map<string, { kill: ClusterKill; at: number }>()

  constructor(private readonly daemon: Pick<WorkerDeps, 'config' | 'log' | 'store' | 'supervisor'>) {}

  /** A message from the channel. */
  heard(message: string): void {
    let kill: ClusterKill
    try {
      kill = JSON.parse(message) as ClusterKill
    } catch {
      return this.daemon.log.warn({ message: message.slice(0, 200) }, 'cluster kill that is not JSON, ignored')
    }
    if (typeof kill?.id !== 'string') return
    if (this.daemon.store.find(kill.id)) return void this.apply(kill)
    this.forgetOld()
    this.early.set(kill.id, { kill, at: Date.now() })
  }

  /** A kill that came for this task before it was admitted here, applied now; false when none did. */
  async takeEarly(id: string): Promise<boolean> {
    const kept = this.early.get(id)
    this.early.delete(id)
    if (!kept) return false
    await this.apply(kept.kill)
    return true
  }

  /** Stops the task a kill names, if it is this daemon's and has not ended. */
  private async apply(kill: ClusterKill): Promise<void> {
    const { daemon } = this
    const task = daemon.store.find(kill.id)
    if (!task || isFinished(task)) return
    logClusterChange(daemon.log, { queue: daemon.config.clusterQueue, channel: 'kills', action: 'kill', taskId: task.id, outcome: 'applied' })
    try {
      // Whoever can publish on the channel can say who asks: a stoppedBy tend does not know is the operator's.
      const stoppedBy = REQUESTED_STOPS.find((each) => each === kill.stoppedBy) ?? 'operator'
      await daemon.supervisor.kill(task.id, {
        signal: normalizeSignal(kill.signal),
        graceMs: kill.graceMs,
        note: typeof kill.reason === 'string' ? kill.reason.slice(0, 500) : undefined,
        stoppedBy,
      })
    } catch (error) {
      daemon.log.error({ err: error, taskId: task.id }, 'cluster kill failed')
    }
  }

  private forgetOld(): void {
    const before = Date.now() - EARLY_KILL_KEEP_MS
    for (const [id, kept] of this.early) if (kept.at < before) this.early.delete(id)
  }
}
