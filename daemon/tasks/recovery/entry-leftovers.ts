import { killLeftovers } from '../../spawn/kill-tree.js'
import { taskMarker } from '../../spawn/run-name.js'
import type { GroupRoots } from '../../sandbox/cgroups.js'
import { killGroupLeftovers } from '../run/finish.js'

/**
 * Kills whatever still runs of a spool entry that is no task the daemon supervises (a corrupt
 * one), by its marker and by its cgroup, and removes its cgroups: once its folder is gone, nothing
 * of it could be reached by any tend command. Answers how many processes were killed.
 */
export async function stopEntryLeftovers(id: string, roots: () => GroupRoots): Promise<number> {
  // Its run's name was in its record: found by its id, which every task's processes carry too.
  const marker = taskMarker({ id })
  const found = await killLeftovers([marker])
  return (found.get(marker)?.length ?? 0) + (await killGroupLeftovers(roots(), id))
}
