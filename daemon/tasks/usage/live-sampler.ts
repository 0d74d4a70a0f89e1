import type { LiveUsage } from '../../../protocol/index.js'
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
   * Its keeper when that is a child subreaper (not a terminal's): its processes are the keeper's
   * descendants, read through the kernel's tree, cheaper than the cgroup's list and as exact.
   */
  keeper?: { pid: number; startTicks: number }
}

export interface LiveSamplerOptions {
  /** The shortest time between two samples of one task, in ms; an answer within it is the last sample. Default 1000. */
  minIntervalMs?: number
  /** The clock, in ms since the epoch. Default Date.now. */
  now?: () => number
}

interface Sample {
  atMs: number
  cpuTicks: number
  live: LiveUsage
  /** Its files, held open from sample to sample. */
  files: TaskProcFiles
}

/**
 * Running tasks' live figures, sampled only when an answer asks for them (`?live=true`), at most
 * once per `minIntervalMs` per task: nothing runs between asks, and a console asking every second
 * for a thousand tasks reads each task's process list (its keeper's children, or its cgroup's) and /proc stat files once a second, through
 * descriptors held from one sample to the next (process-figures.ts) until the task ends (forget). CPU % is of one core,
 * between this sample and the last (a first one: since the task started); memory is the resident
 * set of its processes together (shared pages counted in each).
 */
export class LiveSampler {
  private readonly samples = new Map<string, Sample>()
  private readonly minIntervalMs: number
  private readonly now: () => number
  private lastIso: { ms: number; text: string } | null = null

  constructor(options: LiveSamplerOptions = {}) {
    this.minIntervalMs = options.minIntervalMs ?? 1000
    this.now = options.now ?? Date.now
  }

  sample(task: SampledTask): LiveUsage {
    const now = this.now()
    const last = this.samples.get(task.id)
    if (last && now - last.atMs < this.minIntervalMs) return last.live
    const files = last?.files ?? new TaskProcFiles(task.membersFile ?? null)
    const figures = task.keeper
      ? files.treeFigures(task.keeper, task.leaderStartTicks)
      : files.figures(files.members() ?? [task.leaderPid], task.leaderStartTicks)
    const sinceMs = last ? now - last.atMs : now - task.startedAtMs
    // A process that ended since the last sample takes its ticks with it: never below zero.
    const ticks = Math.max(0, last ? figures.cpuTicks - last.cpuTicks : figures.cpuTicks)
    const cpuPercent = sinceMs > 0 ? Math.round(((ticks * 1000) / CLOCK_TICKS_PER_SECOND / sinceMs) * 1000) / 10 : 0
    const live: LiveUsage = { cpuPercent, memoryBytes: figures.residentBytes, sampledAt: this.isoTime(now) }
    this.samples.set(task.id, { atMs: now, cpuTicks: figures.cpuTicks, live, files })
    return live
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
