import { existsSync, lstatSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { formatBytes, pollUntil } from '../../protocol/index.js'
import type { CgroupJoin } from '../spawn/spawner.js'
import { killUnified, readUnifiedUsage, unifiedLimitsHit, untilUnpopulated, writeUnifiedLimits, type UnifiedUsage } from './cgroup-v2-group.js'

/** A task's limits; null: none of that kind (its group still counts). */
export interface CgroupLimits {
  memoryBytes: number | null
  pidsMax: number | null
}

/**
 * The folders a daemon makes task groups in (its own, see cgroup-parent.ts and cgroup-v2-root.ts).
 * With `unified`, every task also gets a cgroup v2 group there; when its controllers include memory
 * and pids, `memory` and `pids` are that same folder and the v2 group holds the limits.
 */
export interface GroupRoots {
  memory: string | null
  pids: string | null
  unified?: { path: string; controllers: readonly string[] } | null
}

/** Whether the v2 folder holds the limits itself (no v1 group is made then). */
function limitsOnUnified(roots: GroupRoots): boolean {
  return roots.unified != null && roots.memory === roots.unified.path && roots.pids === roots.unified.path
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
 * A task's own cgroups: its v2 group (where the daemon has a v2 subtree) and v1 groups (where the
 * limits are on v1). Every task gets a pids group, which lists its processes exactly
 * (whatever they did to their environment or session); a sandboxed task also gets a memory group,
 * which counts its memory (tmpfs pages it writes included), and the limits it was given. The task
 * moves itself in before it execs anything (see `joinEntries`), so no child can start outside them.
 */
export class TaskCgroups {
  private constructor(
    /** The v1 memory group, or the v2 group when it holds the limits; null: none. */
    private readonly memoryDir: string | null,
    /** The v1 pids group, or the v2 group. */
    private readonly pidsDir: string,
    private readonly limits: CgroupLimits,
    /** Each group folder's identity: memory first, then pids, then the v2 group. */
    readonly dirs: readonly CgroupDir[],
    /** The task's v2 group, or null: none (v1 only). */
    private readonly unifiedDir: string | null = null,
  ) {}

  /** Whether the limits are in the v2 group (its memory.* and pids.* files), no v1 group beside it. */
  private get limitsOnUnified(): boolean {
    return this.unifiedDir !== null && this.dirs.length === 1
  }

  /**
   * Makes the task's groups and sets their limits; on any failure removes what it made, then
   * throws. cgroupfs lives in memory: plain synchronous calls cost less than trips through the
   * thread pool, and the task's start waits for them either way.
   */
  static create(roots: GroupRoots, taskId: string, request: GroupRequest): TaskCgroups {
    const { limits } = request
    const made: CgroupDir[] = []
    try {
      if (roots.unified && limitsOnUnified(roots)) {
        const dir = makeGroup(join(roots.unified.path, taskId))
        made.push(dir)
        writeUnifiedLimits(dir.path, { memoryBytes: request.memory ? limits.memoryBytes : null, pidsMax: limits.pidsMax })
        return new TaskCgroups(request.memory ? dir.path : null, dir.path, limits, made, dir.path)
      }
      if (request.memory && roots.memory) made.push(makeGroup(join(roots.memory, taskId)))
      if (roots.pids) made.push(makeGroup(join(roots.pids, taskId)))
      const v1Groups = made.length
      const unified = roots.unified ? makeGroup(join(roots.unified.path, taskId)) : null
      if (unified) made.push(unified)
      const memoryDir = request.memory && roots.memory ? made[0]!.path : null
      // Without a pids group (no v1 pids controller) the v2 group lists the processes, unlimited.
      const pidsDir = roots.pids ? made[v1Groups - 1]!.path : unified!.path
      if (memoryDir && limits.memoryBytes !== null) {
        writeFileSync(join(memoryDir, 'memory.limit_in_bytes'), String(limits.memoryBytes))
        // Without this the limit only moves the excess to swap (absent where swap is not accounted).
        if (existsSync(join(memoryDir, 'memory.memsw.limit_in_bytes')))
          writeFileSync(join(memoryDir, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes))
      }
      if (roots.pids && limits.pidsMax !== null) writeFileSync(join(pidsDir, 'pids.max'), String(limits.pidsMax))
      const counted = roots.pids ? limits : { memoryBytes: limits.memoryBytes, pidsMax: null }
      return new TaskCgroups(memoryDir, pidsDir, counted, made, unified?.path ?? null)
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
    const unifiedDir = roots.unified && existsSync(join(roots.unified.path, taskId)) ? join(roots.unified.path, taskId) : null
    if (limitsOnUnified(roots)) {
      if (!unifiedDir) return null
      return new TaskCgroups(
        unifiedDir,
        unifiedDir,
        limits,
        [unifiedDir].flatMap((dir) => identityOf(dir) ?? []),
        unifiedDir,
      )
    }
    const pidsDir = roots.pids && existsSync(join(roots.pids, taskId)) ? join(roots.pids, taskId) : null
    if (!pidsDir && !unifiedDir) return null
    const memoryDir = roots.memory && existsSync(join(roots.memory, taskId)) ? join(roots.memory, taskId) : null
    const dirs = [memoryDir, pidsDir, unifiedDir].filter((dir): dir is string => dir !== null).flatMap((dir) => identityOf(dir) ?? [])
    return new TaskCgroups(memoryDir, pidsDir ?? unifiedDir!, limits, dirs, unifiedDir)
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

  /** The file that lists the task's live processes (cgroup.procs of its v2 group, else of its pids group). */
  get membersFile(): string {
    return join(this.unifiedDir ?? this.pidsDir, 'cgroup.procs')
  }

  /** The task's live processes. */
  members(): number[] {
    return readMembers(this.unifiedDir ?? this.pidsDir)
  }

  /** Whether the task has a v2 group: killed at once (cgroup.kill), its end watched (cgroup.events). */
  get unified(): boolean {
    return this.unifiedDir !== null
  }

  /** KILLs every process of a task with a v2 group at once (cgroup.kill); false: none, or no cgroup.kill here. */
  killAll(): boolean {
    return this.unifiedDir !== null && killUnified(this.unifiedDir)
  }

  /** Resolves true once no process of the task is left (v2: cgroup.events `populated 0`, watched), false past `timeoutMs`. */
  untilEmpty(timeoutMs: number): Promise<boolean> {
    if (this.unifiedDir === null) return pollUntil(() => this.members().length === 0, timeoutMs, 25)
    return untilUnpopulated(this.unifiedDir, timeoutMs)
  }

  /** What the task's v2 group counted (cpu.stat; memory.peak and io.stat with those controllers), or null without one. Read before remove(). */
  async unifiedUsage(): Promise<UnifiedUsage | null> {
    return this.unifiedDir === null ? null : readUnifiedUsage(this.unifiedDir)
  }

  /** Which limit the task ran into, if any, as words for its reason. */
  async limitsHit(): Promise<{ memory: string | null; pids: string | null }> {
    if (this.limitsOnUnified) {
      return unifiedLimitsHit(this.unifiedDir!, { memoryBytes: this.memoryDir ? this.limits.memoryBytes : null, pidsMax: this.limits.pidsMax })
    }
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
    const file = this.limitsOnUnified ? 'memory.peak' : 'memory.max_usage_in_bytes'
    const text = await readFile(join(this.memoryDir, file), 'utf8').catch(() => '')
    const bytes = Number(text.trim())
    return text.trim() !== '' && Number.isSafeInteger(bytes) && bytes >= 0 ? bytes : null
  }

  async remove(): Promise<void> {
    await Promise.all([...new Set(this.dirs.map((dir) => dir.path))].map((dir) => removeGroup(dir)))
  }

  /** Processes left in the groups of a task whose daemon died (recovery): its v2 group's, else its pids group's. */
  static leftoverMembers(roots: GroupRoots, taskId: string): number[] {
    const root = roots.unified?.path ?? roots.pids
    return root ? readMembers(join(root, taskId)) : []
  }

  /**
   * KILLs what is left in the v2 group of a task whose daemon died, at once, and waits until it is
   * empty; false without one (or without cgroup.kill, or not empty in time).
   */
  static async killLeftover(roots: GroupRoots, taskId: string, timeoutMs: number): Promise<boolean> {
    const dir = roots.unified ? join(roots.unified.path, taskId) : null
    return dir !== null && existsSync(dir) && killUnified(dir) && (await untilUnpopulated(dir, timeoutMs))
  }

  static async removeLeftover(roots: GroupRoots, taskId: string): Promise<void> {
    const folders = new Set([roots.memory, roots.pids, roots.unified?.path ?? null].filter((root): root is string => root !== null))
    await Promise.all([...folders].map((root) => removeGroup(join(root, taskId))))
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
