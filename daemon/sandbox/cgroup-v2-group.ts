import { watch, writeFileSync, type FSWatcher } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { formatBytes } from '../../protocol/index.js'

// One task's cgroup v2 group (the unified hierarchy): the files the kernel gives every group
// (cgroup.kill, cgroup.events, cpu.stat) and those of the controllers its parent enabled
// (memory.*, pids.*, io.stat). Its folder is made and joined as a v1 group is (cgroups.ts).

/** A task's limits on cgroup v2 (null: none of that kind). */
export interface UnifiedLimits {
  memoryBytes: number | null
  pidsMax: number | null
}

/**
 * Writes the limits the group's controllers can hold: memory.max, and memory.swap.max 0 so that
 * the limit is not merely moved to swap (absent where swap is not accounted), and pids.max. A limit
 * asked of a controller the group lacks throws: the caller checked the controllers before.
 */
export function writeUnifiedLimits(dir: string, limits: UnifiedLimits): void {
  if (limits.memoryBytes !== null) {
    writeFileSync(join(dir, 'memory.max'), String(limits.memoryBytes))
    try {
      writeFileSync(join(dir, 'memory.swap.max'), '0')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
    }
  }
  if (limits.pidsMax !== null) writeFileSync(join(dir, 'pids.max'), String(limits.pidsMax))
}

/** Which limit the task ran into, if any, as words for its reason (memory.events, pids.events). */
export async function unifiedLimitsHit(dir: string, limits: UnifiedLimits): Promise<{ memory: string | null; pids: string | null }> {
  const [memoryEvents, pidsEvents] = await Promise.all([
    limits.memoryBytes !== null ? readFile(join(dir, 'memory.events'), 'utf8').catch(() => '') : '',
    limits.pidsMax !== null ? readFile(join(dir, 'pids.events'), 'utf8').catch(() => '') : '',
  ])
  const oomKills = Number(/^oom_kill (\d+)/m.exec(memoryEvents)?.[1] ?? 0)
  const pidsRefused = Number(/^max (\d+)/m.exec(pidsEvents)?.[1] ?? 0)
  return {
    memory: oomKills > 0 && limits.memoryBytes !== null ? `memory limit of ${formatBytes(limits.memoryBytes)} reached` : null,
    pids: pidsRefused > 0 && limits.pidsMax !== null ? `process limit of ${limits.pidsMax} reached` : null,
  }
}

/**
 * KILLs every process in the group at once, those forked meanwhile included (cgroup.kill): no
 * process of the tree can outrun it by forking. Answers false where the kernel has no cgroup.kill
 * (before 5.14): the caller then kills member by member.
 */
export function killUnified(dir: string): boolean {
  try {
    writeFileSync(join(dir, 'cgroup.kill'), '1')
    return true
  } catch {
    return false
  }
}

/** Whether the group has no process left (cgroup.events `populated 0`); a group gone counts as empty. */
async function isUnpopulated(dir: string): Promise<boolean> {
  try {
    return /^populated 0$/m.test(await readFile(join(dir, 'cgroup.events'), 'utf8'))
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT'
  }
}

/**
 * Resolves true once the group is empty, false when `timeoutMs` passed first. The kernel notifies a
 * change of cgroup.events (inotify's modify): each one is re-read, and so is the file every
 * `rereadMs`, in case a notification came between a read and the watch.
 */
export function untilUnpopulated(dir: string, timeoutMs: number, rereadMs = 100): Promise<boolean> {
  return new Promise((resolveEmpty) => {
    let watcher: FSWatcher | null = null
    let settled = false
    const finish = (empty: boolean) => {
      if (settled) return
      settled = true
      watcher?.close()
      clearInterval(reread)
      clearTimeout(deadline)
      resolveEmpty(empty)
    }
    const check = () => {
      void isUnpopulated(dir).then((empty) => {
        if (empty) finish(true)
      })
    }
    try {
      watcher = watch(join(dir, 'cgroup.events'), { persistent: false }, check)
      watcher.on('error', () => {})
    } catch {
      // No file to watch (the group is gone): the read below says so.
    }
    const reread = setInterval(check, rereadMs)
    const deadline = setTimeout(() => void isUnpopulated(dir).then(finish), timeoutMs)
    check()
  })
}

/** What the group's processes used together, as far as its files tell (each figure null when absent). */
export interface UnifiedUsage {
  cpuUserMs: number | null
  cpuSystemMs: number | null
  peakMemoryBytes: number | null
  readBytes: number | null
  writeBytes: number | null
}

/** The group's figures: cpu.stat (every group has it), memory.peak (memory controller), io.stat (io controller). */
export async function readUnifiedUsage(dir: string): Promise<UnifiedUsage> {
  const read = (name: string) => readFile(join(dir, name), 'utf8').catch(() => null)
  const [cpu, peak, io] = await Promise.all([read('cpu.stat'), read('memory.peak'), read('io.stat')])
  const cpuField = (name: string) => {
    const match = cpu === null ? null : new RegExp(`^${name} (\\d+)$`, 'm').exec(cpu)
    return match ? safeInteger(Math.floor(Number(match[1]) / 1000)) : null
  }
  const ioField = (name: string) => {
    if (io === null) return null
    let total = 0
    for (const match of io.matchAll(new RegExp(`\\b${name}=(\\d+)`, 'g'))) total += Number(match[1])
    return safeInteger(total)
  }
  return {
    cpuUserMs: cpuField('user_usec'),
    cpuSystemMs: cpuField('system_usec'),
    peakMemoryBytes: peak === null ? null : safeInteger(Number(peak.trim())),
    readBytes: ioField('rbytes'),
    writeBytes: ioField('wbytes'),
  }
}

function safeInteger(value: number): number | null {
  return Number.isSafeInteger(value) && value >= 0 ? value : null
}
