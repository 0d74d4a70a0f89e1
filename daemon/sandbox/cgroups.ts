import { existsSync, mkdirSync, readFileSync, rmdirSync, statSync } from 'node:fs'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { formatBytes } from '../../protocol/index.js'
import type { CgroupJoin } from '../spawn/spawner.js'

export interface CgroupLimits {
  memoryBytes: number
  pidsMax: number
}

/**
 * A task's own cgroup v1 groups. Every task gets a pids group, which lists its processes exactly
 * (whatever they did to their environment or session); the strict profile adds a memory group and
 * sets both limits. The task moves itself in before it execs anything (see `joinEntries`), so no
 * child can start outside them.
 */
export class TaskCgroups {
  private constructor(
    private readonly memoryDir: string | null,
    private readonly pidsDir: string,
    private readonly limits: CgroupLimits | null,
  ) {}

  /** Each group folder as it was right after it was made: path, identity, owner (empty for groups found by existing()). */
  readonly dirs: CgroupJoin[] = []

  /** Makes the task's groups and sets their limits; on any failure removes what it made, then throws. */
  static async create(roots: { memory: string | null; pids: string }, taskId: string, limits: CgroupLimits | null): Promise<TaskCgroups> {
    const pidsDir = join(roots.pids, taskId)
    // cgroupfs lives in memory: a plain mkdir costs less than a trip through the thread pool.
    mkdirSync(pidsDir, { recursive: true })
    const pidsMade = madeAs(pidsDir)
    if (!limits || !roots.memory) return withDirs(new TaskCgroups(null, pidsDir, null), [pidsMade])
    const memoryDir = join(roots.memory, taskId)
    const groups = new TaskCgroups(memoryDir, pidsDir, limits)
    try {
      await mkdir(memoryDir, { recursive: true })
      withDirs(groups, [madeAs(memoryDir), pidsMade])
      await writeFile(join(memoryDir, 'memory.limit_in_bytes'), String(limits.memoryBytes))
      // Without this the limit only moves the excess to swap.
      await writeFile(join(memoryDir, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes)).catch(() => undefined)
      await writeFile(join(pidsDir, 'pids.max'), String(limits.pidsMax))
    } catch (error) {
      await groups.remove()
      throw new Error(`setting the task's cgroup limits (memory ${limits.memoryBytes} bytes, ${limits.pidsMax} processes) failed: ${(error as Error).message}`, { cause: error })
    }
    return groups
  }

  /**
   * The groups an earlier daemon made for a task that still runs (a restart): null when it has
   * none (workspace tasks, or no cgroups on this machine).
   */
  static existing(roots: { memory: string | null; pids: string | null }, taskId: string, limits: CgroupLimits | null): TaskCgroups | null {
    if (!roots.pids || !existsSync(join(roots.pids, taskId))) return null
    const memoryDir = limits && roots.memory && existsSync(join(roots.memory, taskId)) ? join(roots.memory, taskId) : null
    return new TaskCgroups(memoryDir, join(roots.pids, taskId), memoryDir ? limits : null)
  }

  /**
   * What the task's first process joins its groups by, before it execs: each group's folder as it
   * was made (device, inode, owner). The spawner opens the folder without following a symbolic link,
   * checks it is that folder still, and writes into its `tasks` file from there (the process moves
   * itself, a single thread, which the kernel does without the global lock that a write to
   * cgroup.procs takes; see child.c): a group renamed and replaced since (its parent may be another
   * uid's) fails the spawn. `members()` still reads cgroup.procs: every process with a thread in the group.
   */
  joinEntries(): CgroupJoin[] {
    return this.dirs.map((dir) => ({ ...dir }))
  }

  /** The task's live processes. */
  members(): number[] {
    return readMembers(this.pidsDir)
  }

  /** Which limit the task ran into, if any, as words for its reason. */
  async limitsHit(): Promise<{ memory: string | null; pids: string | null }> {
    if (!this.limits || !this.memoryDir) return { memory: null, pids: null }
    const oomControl = await readFile(join(this.memoryDir, 'memory.oom_control'), 'utf8').catch(() => '')
    const oomKills = Number(/oom_kill (\d+)/.exec(oomControl)?.[1] ?? 0)
    const pidsEvents = await readFile(join(this.pidsDir, 'pids.events'), 'utf8').catch(() => '')
    const pidsRefused = Number(/max (\d+)/.exec(pidsEvents)?.[1] ?? 0)
    return {
      memory: oomKills > 0 ? `memory limit of ${formatBytes(this.limits.memoryBytes)} reached` : null,
      pids: pidsRefused > 0 ? `process limit of ${this.limits.pidsMax} reached` : null,
    }
  }

  async remove(): Promise<void> {
    await Promise.all([this.memoryDir && removeGroup(this.memoryDir), removeGroup(this.pidsDir)])
  }

  /** Processes left in the pids group of a task whose daemon died (recovery). */
  static leftoverMembers(pidsRoot: string, taskId: string): number[] {
    return readMembers(join(pidsRoot, taskId))
  }

  static async removeLeftover(roots: { memory: string | null; pids: string | null }, taskId: string): Promise<void> {
    await Promise.all([roots.memory && removeGroup(join(roots.memory, taskId)), roots.pids && removeGroup(join(roots.pids, taskId))])
  }
}

function readMembers(dir: string): number[] {
  try {
    return readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number)
  } catch {
    return []
  }
}

/**
 * The task's last processes can still be exiting when bubblewrap has been reaped (the kernel
 * releases them a little later), and until then rmdir answers EBUSY: retry for a while rather
 * than leave the group behind.
 */
async function removeGroup(dir: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      rmdirSync(dir)
      return
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EBUSY' || Date.now() >= deadline) return
    }
    await delay(10)
  }
}

/** A group folder's identity, read right after it was made. */
function madeAs(path: string): CgroupJoin {
  const info = statSync(path, { bigint: true })
  return { path, dev: String(info.dev), ino: String(info.ino), uid: Number(info.uid) }
}

function withDirs(groups: TaskCgroups, dirs: CgroupJoin[]): TaskCgroups {
  groups.dirs.push(...dirs)
  return groups
}
