import { readdirSync } from 'node:fs'
import type { GroupRoots } from '../../sandbox/cgroups.js'
import { killGroupLeftovers } from '../run/finish.js'

/**
 * At recovery, every task group in this daemon's own cgroup folders (never another daemon's: each
 * has its folder) that is not a task supervised again goes: what still runs in it is killed (no
 * tend command could reach it: its entry is corrupt, or its folder is gone), then the group is
 * removed. Groups a daemon could not remove when their task ended (EBUSY past its wait) go too.
 * Answers how many processes were killed.
 */
export async function sweepTaskCgroups(roots: GroupRoots, supervised: ReadonlySet<string>): Promise<number> {
  const names = new Set<string>()
  for (const root of new Set([roots.pids, roots.memory, roots.unified?.path ?? null])) {
    if (!root) continue
    try {
      for (const entry of readdirSync(root, { withFileTypes: true })) if (entry.isDirectory()) names.add(entry.name)
    } catch {
      // No folder yet: nothing to sweep.
    }
  }
  let killed = 0
  for (const name of names) {
    if (supervised.has(name)) continue
    killed += await killGroupLeftovers(roots, name)
  }
  return killed
}
