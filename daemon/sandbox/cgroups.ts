import { existsSync, lstatSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { formatBytes, pollUntil } from '../../protocol/index.js'
import type { CgroupJoin } from '../spawn/spawner.js'

/** A task's limits; null: none of that kind (its group still counts). */
export interface CgroupLimits {
  memoryBytes: number | null
  pidsMax: number | null
}

/** The folders a daemon makes task groups in (its own, see cgroup-parent.ts). */
export interface GroupRoots {
  memory: string | null
  pids: string | null
}

/** What groups a task gets: a memory group (workspace, strict) or only a pids group (off), and their limits. */
export interface GroupRequest {
  memory: boolean
  limits: CgroupLimits
}

/**
 * A group folder as the kernel had it right after the daemon made it: the task's first process
 * joins only a folder that is still this one (same device, inode and owner), never whatever a path
 * names by then.
 */
export type CgroupDir = CgroupJoin

/**
 * A task's own cgroup v1 groups. Every task gets a pids group, which lists its processes exactly
 * (whatever they did to their environment or session); a sandboxed task also gets a memory group,
 * which counts its memory (tmpfs pages it writes included), and the limits it was given. The task
 * moves itself in before it execs anything (see `joinEntries`), so no child can start outside them.
 */
export class TaskCgroups {
  private constructor(
    private readonly memoryDir: string | null,
    private readonly pidsDir: string,
    private readonly limits: CgroupLimits,
    /** Each group folder's identity, memory first, then pids. */
    readonly dirs: readonly CgroupDir[],
  ) {}

  /**
   * Makes the task's groups and sets their limits; on any failure removes what it made, then
   * throws. cgroupfs lives in memory: plain synchronous calls cost less than trips through the
   * thread pool, and the task's start waits for them either way.
   */
  static create(roots: GroupRoots & { pids: string }, taskId: string, request: GroupRequest): TaskCgroups {
    const { limits } = request
    const made: CgroupDir[] = []
    try {
      if (request.memory && roots.memory) made.push(makeGroup(join(roots.memory, taskId)))
      made.push(makeGroup(join(roots.pids, taskId)))
      const memoryDir = request.memory && roots.memory ? made[0]!.path : null
      const pidsDir = made[made.length - 1]!.path
      if (memoryDir && limits.memoryBytes !== null) {
        writeFileSync(join(memoryDir, 'memory.limit_in_bytes'), String(limits.memoryBytes))
        // Without this the limit only moves the excess to swap (absent where swap is not accounted).
        if (existsSync(join(memoryDir, 'memory.memsw.limit_in_bytes')))
          writeFileSync(join(memoryDir, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes))
      }
      if (limits.pidsMax !== null) writeFileSync(join(pidsDir, 'pids.max'), String(limits.pidsMax))
      return new TaskCgroups(memoryDir, pidsDir, limits, made)
    } catch (error) {
      for (const dir of made) rmdirQuietly(dir.path)
      throw new Error(
        `making the task's cgroups (memory ${limits.memoryBytes ?? 'counted'}, processes ${limits.pidsMax ?? 'unlimited'}) failed: ${(error as Error).message}`,
        { cause: error },
      )
    }
  }

  /**
   * The groups an earlier daemon made for a task that still runs (a restart): null when it has
   * none (no cgroups on this machine, or a task of an older daemon without them).
   */
  static existing(roots: GroupRoots, taskId: string, limits: CgroupLimits): TaskCgroups | null {
    if (!roots.pids || !existsSync(join(roots.pids, taskId))) return null
    const memoryDir = roots.memory && existsSync(join(roots.memory, taskId)) ? join(roots.memory, taskId) : null
    const dirs = [memoryDir, join(roots.pids, taskId)].filter((dir): dir is string => dir !== null).flatMap((dir) => identityOf(dir) ?? [])
    return new TaskCgroups(memoryDir, join(roots.pids, taskId), limits, dirs)
  }

  /**
   * What the task's first process joins its groups by, before it execs: each group's folder as it
   * was made (device, inode, owner). The spawner opens the folder without following a symbolic link,
   * checks it is that folder still, and writes into its `tasks` file from there (the process moves
   * itself, a single thread, which the kernel does without the global lock that a write to
   * cgroup.procs takes; see child.c): a group renamed and replaced since fails the spawn.
   * `members()` still reads cgroup.procs: every process with a thread in the group.
   */
  joinEntries(): CgroupJoin[] {
    return this.dirs.map((dir) => ({ ...dir }))
  }

  /** The file that lists the task's live processes (cgroup.procs of its pids group). */
  get membersFile(): string {
    return join(this.pidsDir, 'cgroup.procs')
  }

  /** The task's live processes. */
  members(): number[] {
    return readMembers(this.pidsDir)
  }

  /** Which limit the task ran into, if any, as words for its reason. */
  async limitsHit(): Promise<{ memory: string | null; pids: string | null }> {
    const { memoryBytes, pidsMax } = this.limits
    const [oomControl, pidsEvents] = await Promise.all([
      memoryBytes !== null && this.memoryDir ? readFile(join(this.memoryDir, 'memory.oom_control'), 'utf8').catch(() => '') : '',
      pidsMax !== null ? readFile(join(this.pidsDir, 'pids.events'), 'utf8').catch(() => '') : '',
    ])
    const oomKills = Number(/oom_kill (\d+)/.exec(oomControl)?.[1] ?? 0)
    const pidsRefused = Number(/max (\d+)/.exec(pidsEvents)?.[1] ?? 0)
    return {
      memory: oomKills > 0 && memoryBytes !== null ? `memory limit of ${formatBytes(memoryBytes)} reached` : null,
      pids: pidsRefused > 0 && pidsMax !== null ? `process limit of ${pidsMax} reached` : null,
    }
  }

  /**
   * The most memory the task's tree held at once (its memory group's high-water mark, page cache
   * and tmpfs it wrote included), or null when it has no memory group. Read before remove().
   */
  async peakMemoryBytes(): Promise<number | null> {
    if (!this.memoryDir) return null
    const text = await readFile(join(this.memoryDir, 'memory.max_usage_in_bytes'), 'utf8').catch(() => '')
    const bytes = Number(text.trim())
    return text.trim() !== '' && Number.isSafeInteger(bytes) && bytes >= 0 ? bytes : null
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

/** A new group folder, and what it is: made here, so a folder that already exists is refused (EEXIST). */
function makeGroup(path: string): CgroupDir {
  mkdirSync(path)
  const identity = identityOf(path)
  if (!identity || identity.uid !== process.getuid!()) throw new Error(`${path} is not the folder the daemon just made`)
  return identity
}

/**
 * A stat of the folder itself (no link is followed; cgroupfs has none, and only root or the daemon's
 * uid can write its parent, see cgroup-parent.ts).
 */
function identityOf(path: string): CgroupDir | null {
  try {
    const stat = lstatSync(path, { bigint: true })
    return stat.isDirectory() ? { path, dev: String(stat.dev), ino: String(stat.ino), uid: Number(stat.uid) } : null
  } catch {
    return null
  }
}

function rmdirQuietly(path: string): void {
  try {
    rmdirSync(path)
  } catch {
    // gone already
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
  // Released within a millisecond or two of the last process's end: a short wait, often repeated,
  // keeps the task's final record from waiting for nothing.
  await pollUntil(
    () => {
      try {
        rmdirSync(dir)
        return true
      } catch (error) {
        return (error as NodeJS.ErrnoException).code !== 'EBUSY'
      }
    },
    timeoutMs,
    1,
  )
}
