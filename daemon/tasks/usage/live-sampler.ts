import type { LiveUsage, Task } from '../../../protocol/index.js'
import { CLOCK_TICKS_PER_SECOND, TaskProcFiles } from './process-figures.js'

/** A running task, as the sampler reads it. */
export interface SampledTask {
  id: string
  /** When it started (ms since the epoch): a first sample's CPU % is its average since then. */
  startedAtMs: number
  /** Its leader's pid: with neither a keeper nor a cgroup, the leader alone is counted. */
  leaderPid: number
  /** Its leader's start time (clock ticks after boot); 0 when unknown (a process older than it is none of the task's). */
  leaderStartTicks: number
  /** Its cgroup's process list (cgroup.procs: kernel facts); absent without a cgroup. */
  membersFile?: string
  /**
   * Its keeper (a child subreaper): without a cgroup, its processes are the keeper's descendants,
   * read through the kernel's tree; with one, the cgroup's list is read instead.
   */
  keeper?: { pid: number; startTicks: number }
}

/**
 * The samples a second the sampler takes at most, spread over its tasks (each costs the kernel's
 * generation of a process list and a stat line per process: 25 to 40 µs on a loaded 2-core
 * machine): up to this many tasks each get new figures every second; more are each sampled less
 * often, in turn (every 10 s for 1,000), so that what sampling costs the daemon stays under 1% of a
 * core however many run. `sampledAt` says how fresh a task's figures are.
 */
export const SAMPLES_PER_SECOND = 100

export interface LiveSamplerOptions {
  /** The shortest time between two samples of one task, in ms; an answer within it is the last sample. Default 1000. */
  minIntervalMs?: number
  /** The clock, in ms since the epoch. Default Date.now. */
  now?: () => number
  /** Where in its interval a task's second sample falls, from 0 to 1 (spreads the samples over the asks). Default Math.random. */
  random?: () => number
}

interface Sample {
  atMs: number
  /**
   * A first sample's place in the budget's interval (0 to 1), where its second falls, so that tasks
   * first asked for together are not all sampled again in the same ask; null from the second on.
   */
  spread: number | null
  cpuTicks: number
  live: LiveUsage
  /** Its files, held open from sample to sample. */
  files: TaskProcFiles
}

/**
 * Running tasks' live figures, sampled only when an answer asks for them (`?live=true`), at most
 * once per `minIntervalMs` per task and SAMPLES_PER_SECOND in all: nothing runs between asks, and a console asking every second
 * for a thousand tasks reads each task's process list (its keeper's children, or its cgroup's) and /proc stat files once a second, through
 * descriptors held from one sample to the next (process-figures.ts) until the task ends (forget). CPU % is of one core,
 * between this sample and the last (a first one: since the task started); memory is the resident
 * set of its processes together (shared pages counted in each).
 */
export class LiveSampler {
  private readonly samples = new Map<string, Sample>()
  private readonly minIntervalMs: number
  private readonly now: () => number
  private readonly random: () => number
  private lastIso: { ms: number; text: string } | null = null

  constructor(options: LiveSamplerOptions = {}) {
    this.minIntervalMs = options.minIntervalMs ?? 1000
    this.now = options.now ?? Date.now
    this.random = options.random ?? Math.random
  }

  /**
   * A running task's live figures, when they can be read (undefined for any other task): its last
   * ones while fresh, else a sample of what `sampledOf` gives of it (null: nothing to read).
   */
  usageOf(task: Task, sampledOf: (startedAtMs: number) => SampledTask | null | undefined): LiveUsage | undefined {
    if (task.state !== 'running' || task.startedAt === null) return undefined
    const fresh = this.fresh(task.id)
    if (fresh) return fresh
    const sampled = sampledOf(Date.parse(task.startedAt))
    return sampled ? this.sample(sampled) : undefined
  }

  /** The task's last figures while they are fresh enough to answer (its next sample is not due): no file is read, nothing is made. */
  private fresh(id: string): LiveUsage | undefined {
    const last = this.samples.get(id)
    return last && this.now() - last.atMs < this.waitMs(last) ? last.live : undefined
  }

  sample(task: SampledTask): LiveUsage {
    const now = this.now()
    const last = this.samples.get(task.id)
    if (last && now - last.atMs < this.waitMs(last)) return last.live
    const files = last?.files ?? new TaskProcFiles(task.membersFile ?? null)
    // Its cgroup's list when it has one (one read, the whole tree: a task cannot leave it without
    // root), else the keeper's tree (a file per process), else its leader alone.
    const members = files.members()
    const figures = members
      ? files.figures(members, task.leaderStartTicks)
      : task.keeper
        ? files.treeFigures(task.keeper, task.leaderStartTicks)
        : files.figures([task.leaderPid], task.leaderStartTicks)
    const sinceMs = last ? now - last.atMs : now - task.startedAtMs
    // A process that ended since the last sample takes its ticks with it: never below zero.
    const ticks = Math.max(0, last ? figures.cpuTicks - last.cpuTicks : figures.cpuTicks)
    const cpuPercent = sinceMs > 0 ? Math.round(((ticks * 1000) / CLOCK_TICKS_PER_SECOND / sinceMs) * 1000) / 10 : 0
    const live: LiveUsage = { cpuPercent, memoryBytes: figures.residentBytes, sampledAt: this.isoTime(now) }
    this.samples.set(task.id, { atMs: now, spread: last ? null : this.random(), cpuTicks: figures.cpuTicks, live, files })
    return live
  }

  /** How long after its last sample a task is sampled again: once a second, or less often when the budget is shared by more tasks. */
  private waitMs(last: Sample): number {
    const intervalMs = Math.max(this.minIntervalMs, Math.ceil(this.samples.size / SAMPLES_PER_SECOND) * 1000)
    return last.spread === null ? intervalMs : this.minIntervalMs + last.spread * (intervalMs - this.minIntervalMs)
  }

  /** The task has ended: its last sample goes. */
  forget(id: string): void {
    this.samples.get(id)?.files.close()
    this.samples.delete(id)
  }

  /** The time as ISO 8601, once per millisecond: a list samples its tasks within one or two. */
  private isoTime(ms: number): string {
    if (this.lastIso?.ms !== ms) this.lastIso = { ms, text: new Date(ms).toISOString() }
    return this.lastIso.text
  }
}
