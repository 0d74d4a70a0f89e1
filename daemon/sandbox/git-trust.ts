import { statSync } from 'node:fs'
import { dirname } from 'node:path'
import { isWithin, type PinnedPath } from './path-policy.js'

/**
 * git refuses a repository whose work tree or git folder another uid owns ("detected dubious
 * ownership"): it keeps a user from running hooks and settings (core.fsmonitor, core.hooksPath)
 * that someone else planted. A task on an identity of its own owns what is idmapped to it: each
 * writable folder's owner shows as the task, so git's own check passes there as it would for that
 * owner, and refuses everything else. Two settings, in the task's environment, keep that so:
 *
 * - safe.directory, once per writable folder that only its owner may write (no group or other
 *   write bit): whatever `.git` such a folder holds, a file or a folder, its owner (or root) put
 *   there, so git may use it even when its git folder lies elsewhere (a linked worktree whose main
 *   repository was not declared writable). A folder others may write is never listed: a `.git`
 *   another user made there is exactly what git's check is for. git 2.39 compares these with the
 *   work tree's path exactly (or, without a work tree, the git folder's): no prefixes, no globs.
 *   They go through git's command-line configuration (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_n,
 *   GIT_CONFIG_VALUE_n), after whatever the task's own environment gives there.
 * - GIT_CEILING_DIRECTORIES: the folder above each outermost writable folder, so that git looking
 *   for a repository from the task's folders never climbs above them into one it was not given
 *   (another user's `.git` in a world-writable folder around the cwd, say). Appended to the
 *   task's own list; a path with a `:` in it cannot be written in that list and is left out.
 */
export function trustingGivenRepositories(env: Readonly<Record<string, string>>, writable: readonly PinnedPath[]): Record<string, string> {
  const trusted = { ...env }
  const ceilings = outermost(writable)
    .map((entry) => dirname(entry.path))
    .filter((path) => path !== '/' && !path.includes(':'))
  if (ceilings.length > 0)
    trusted.GIT_CEILING_DIRECTORIES = [...(env.GIT_CEILING_DIRECTORIES ? [env.GIT_CEILING_DIRECTORIES] : []), ...new Set(ceilings)].join(':')
  const given = env.GIT_CONFIG_COUNT
  // A count that is not a number is the task's to fix: git refuses it anyway, so nothing is appended to it.
  if (given !== undefined && given !== '' && !/^\d{1,6}$/.test(given)) return trusted
  const safe = writable.filter(onlyItsOwnerWrites).map((entry) => entry.path)
  let count = given ? Number(given) : 0
  for (const path of safe) {
    trusted[`GIT_CONFIG_KEY_${count}`] = 'safe.directory'
    trusted[`GIT_CONFIG_VALUE_${count}`] = path
    count += 1
  }
  if (safe.length > 0) trusted.GIT_CONFIG_COUNT = String(count)
  return trusted
}

/** The folders no other of them lies in. */
function outermost(writable: readonly PinnedPath[]): PinnedPath[] {
  return writable.filter((entry) => !writable.some((other) => other !== entry && other.path !== entry.path && isWithin(entry.path, other.path)))
}

/**
 * Whether the folder, still the one pinned, may be written by its owner alone: no group or other
 * write bit (an ACL that grants another writer shows in the group bits, as its mask).
 */
function onlyItsOwnerWrites(entry: PinnedPath): boolean {
  const info = statSync(entry.path, { bigint: true, throwIfNoEntry: false })
  if (!info || String(info.dev) !== entry.dev || String(info.ino) !== entry.ino) return false
  return (Number(info.mode) & 0o022) === 0
}
