import { accessSync, constants, realpathSync, statSync, type Stats } from 'node:fs'
import { delimiter, dirname, isAbsolute, join } from 'node:path'

/**
 * Which folders a process may run programs from, found on PATH. npm puts node_modules/.bin of the
 * project and of every folder above it first on PATH, and a folder under /var/tmp or a shared
 * checkout may be another user's: whoever can write a folder chooses what a program found there
 * does. So a folder counts only on kernel facts: it is absolute, and it and every folder above it
 * (the real ones, symlinks resolved) are owned by root or the process's uid and writable by no one
 * else; and it is the real folder that is used, never the entry's path through a link. A sticky
 * folder (/tmp) above one is the exception: others may add to it, but cannot rename or remove what
 * root or the uid owns inside it.
 */

// The mode bits (node's fs.constants lacks S_ISVTX).
const STICKY = 0o1000
const GROUP_WRITE = 0o020
const OTHER_WRITE = 0o002

/** A PATH entry left out, and why. */
export interface SkippedPathEntry {
  path: string
  reason: string
}

/** Why programs must not be run from this folder by a process of `uid`; null: they may; 'missing': it does not exist. */
export function programFolderProblem(folder: string, uid: number): string | 'missing' | null {
  const resolved = resolveProgramFolder(folder, uid)
  return 'real' in resolved ? null : resolved.problem
}

/**
 * The real folder behind a PATH entry, when programs may be run from it: that folder, not the
 * entry, is what a caller puts on PATH and runs programs from. A symlink on the way (another user's,
 * or in another user's folder) can be pointed elsewhere at any time, between the check and the run
 * included; the real folder, on a chain no one else can change, cannot.
 */
function resolveProgramFolder(folder: string, uid: number): { real: string } | { problem: string | 'missing' } {
  if (!isAbsolute(folder)) return { problem: 'not an absolute path (it means a different folder in each working directory)' }
  let real: string
  try {
    real = realpathSync(folder)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    return { problem: code === 'ENOENT' || code === 'ENOTDIR' ? 'missing' : `cannot be resolved (${code})` }
  }
  const problem = realChainProblem(real, uid, real !== folder ? ` (it is ${real})` : '')
  return problem === null ? { real } : { problem }
}

/** The same rule for an already resolved folder: it and each folder above it. */
function realChainProblem(real: string, uid: number, shownAs: string): string | null {
  for (let folder = real, isEntry = true; ; folder = dirname(folder), isEntry = false) {
    let stats: Stats
    try {
      stats = statSync(folder)
    } catch (error) {
      return `${folder} cannot be read (${(error as NodeJS.ErrnoException).code})`
    }
    const where = isEntry ? `it${shownAs}` : folder
    if (!stats.isDirectory()) return `${where} is not a folder`
    if (stats.uid !== 0 && stats.uid !== uid) return `${where} is writable by uid ${stats.uid} (its owner)`
    // Sticky and above: what root or the uid made inside it (the folder below, checked already) stays theirs.
    const sticky = !isEntry && (stats.mode & STICKY) !== 0
    if (!sticky && (stats.mode & OTHER_WRITE) !== 0) return `${where} is writable by every user`
    if (!sticky && (stats.mode & GROUP_WRITE) !== 0) return `${where} is writable by group ${stats.gid}`
    const parent = dirname(folder)
    if (parent === folder) return null
  }
}

/**
 * The real folders behind PATH's entries that a process of `uid` may run programs from, in order
 * and once each, and the entries left out (a missing folder is dropped without a word).
 */
export function safePathEntries(path: string | undefined, uid: number): { entries: string[]; skipped: SkippedPathEntry[] } {
  const entries: string[] = []
  const skipped: SkippedPathEntry[] = []
  for (const entry of (path ?? '').split(delimiter)) {
    if (entry === '') {
      skipped.push({ path: entry, reason: 'an empty entry means the working directory' })
      continue
    }
    if (skipped.some((seen) => seen.path === entry)) continue
    const resolved = resolveProgramFolder(entry, uid)
    if ('real' in resolved) {
      if (!entries.includes(resolved.real)) entries.push(resolved.real)
    } else if (resolved.problem !== 'missing') skipped.push({ path: entry, reason: resolved.problem })
  }
  return { entries, skipped }
}

/** PATH as a process of `uid` should have it: its safe entries only. */
export function safePath(path: string | undefined, uid: number): string {
  return safePathEntries(path, uid).entries.join(delimiter)
}

/** The words for a skipped entry, as logs and the CLI print them. */
export function skippedEntryText(entry: SkippedPathEntry): string {
  return `skipped ${entry.path === '' ? '(empty)' : entry.path} on PATH: ${entry.reason}`
}

/**
 * A program by name, looked up only in the real folders behind PATH's safe entries, and itself a
 * regular executable file that only root or `uid` can change (its real place, if a link, on a safe
 * folder too): its path in that real folder (a link there is root's or the uid's to change, and keeps
 * the name a multi-call program reads), or null.
 */
export function findSafeProgram(program: string, path: string | undefined, uid: number): string | null {
  if (program === '' || program.includes('/')) return null
  for (const folder of safePathEntries(path, uid).entries) {
    const candidate = join(folder, program)
    try {
      accessSync(candidate, constants.X_OK)
      const real = realpathSync(candidate)
      const stats = statSync(real)
      if (!stats.isFile()) continue
      if ((stats.uid !== 0 && stats.uid !== uid) || (stats.mode & (GROUP_WRITE | OTHER_WRITE)) !== 0) continue
      if (realChainProblem(dirname(real), uid, '') !== null) continue
      return candidate
    } catch {
      // not here
    }
  }
  return null
}
