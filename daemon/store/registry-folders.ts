import { lstatSync, mkdirSync, mkdtempSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { TendError } from '../../protocol/index.js'
import { homeRegistryDir, type RegistryUser } from './home-registry.js'
import { ownFolderProblem } from './home-safety.js'

/**
 * Which folders hold a user's registry of tend homes (home-registry.ts). A user whose passwd home
 * is its own keeps one there, where no one else can make it first. A user without one keeps it in
 * /var/tmp, where any local user can make `tend-homes-<uid>` before it: then its daemons keep
 * their registry in `tend-homes-<uid>.<random>` instead (made with mkdtemp, so no name can be
 * taken in advance) and say so in their log. Whoever reads a uid's registry reads every such
 * folder that uid owns: daemons that chose different ones still find each other.
 */

const SHARED_PARENT = '/var/tmp'
const SHARED_NAME = /^tend-homes-(\d+)(?:\.[A-Za-z0-9]+)?$/
/** Registry folders of one uid in /var/tmp that are read (sorted by name; the usual one sorts first). */
const MAX_FOLDERS_PER_UID = 8

/** The registry a daemon records its home in, and the usual folder it could not use (another user's), if so. */
export interface OpenedRegistry {
  dir: string
  unusable: { path: string; problem: string } | null
}

/**
 * Chooses and makes (0700) the registry of `user`'s daemons. In the user's passwd home, a folder
 * that is not its own is its own doing (or root's): TEND_ERR_HOME_UNSAFE, as for its home. In
 * /var/tmp another user's folder is passed over: never a reason not to start.
 */
export function openRegistry(user: RegistryUser): OpenedRegistry {
  const usual = homeRegistryDir(user)
  if (!inShared(usual, user.uid)) {
    makeFolder(usual)
    const problem = ownFolderProblem(usual, user.uid)
    if (problem) throw new TendError('TEND_ERR_HOME_UNSAFE', { path: usual, detail: `the registry of tend homes ${problem}` })
    return { dir: usual, unusable: null }
  }
  makeFolder(usual)
  const problem = ownFolderProblem(usual, user.uid)
  if (problem === null) return { dir: usual, unusable: null }
  const unusable = { path: usual, problem }
  // One made earlier by a daemon of this user, else a new one.
  const earlier = sharedRegistries(user.uid).find((dir) => dir !== usual && ownFolderProblem(dir, user.uid) === null)
  if (earlier) return { dir: earlier, unusable }
  try {
    return { dir: mkdtempSync(`${usual}.`), unusable }
  } catch (error) {
    throw new TendError(
      'TEND_ERR_HOME_UNSAFE',
      { path: usual, detail: `the registry of tend homes ${problem}, and no other can be made: ${(error as Error).message}` },
      { cause: error },
    )
  }
}

/** Every registry folder of `user`: the one in its passwd home, and every one in /var/tmp it owns. */
export function registryFolders(user: RegistryUser, shared: ReadonlyMap<number, readonly string[]>): string[] {
  const usual = homeRegistryDir(user)
  const others = shared.get(user.uid) ?? []
  return inShared(usual, user.uid) ? [...others] : [usual, ...others]
}

/** Whether homeRegistryDir chose the folder in /var/tmp (the user has no home of its own). */
function inShared(usual: string, uid: number): boolean {
  return usual === join(SHARED_PARENT, `tend-homes-${uid}`)
}

/** The registry folders in /var/tmp of one uid (see sharedRegistriesByUid), sorted by name. */
export function sharedRegistries(uid: number): string[] {
  return sharedRegistriesByUid().get(uid) ?? []
}

/** Every `tend-homes-<uid>[.<suffix>]` folder in /var/tmp that is a folder owned by that uid, by uid. */
export function sharedRegistriesByUid(): Map<number, string[]> {
  return scanShared().found
}

/** sharedRegistriesByUid(), and how many names the folder (/var/tmp) held. */
function scanShared(parent: string = SHARED_PARENT): { found: Map<number, string[]>; names: number } {
  const found = new Map<number, string[]>()
  let names: string[]
  try {
    names = readdirSync(parent)
  } catch {
    return { found, names: 0 }
  }
  for (const name of names.filter((each) => SHARED_NAME.test(each)).sort()) {
    const uid = Number(SHARED_NAME.exec(name)![1])
    const path = join(parent, name)
    const info = lstatSync(path, { throwIfNoEntry: false })
    if (!info?.isDirectory() || info.uid !== uid) continue
    const folders = found.get(uid) ?? []
    // A daemon takes the first one of its own; more are its own user's doing, and cost every reader.
    if (folders.length < MAX_FOLDERS_PER_UID) found.set(uid, [...folders, path])
  }
  return { found, names: names.length }
}

/**
 * A folder unchanged for this long is trusted to stay as read: its ctime ticks coarsely (its
 * ctime, not its mtime: no one can set it).
 */
const SETTLED_MS = 1000
/**
 * Up to this many names in /var/tmp (listing them costs ~3 ms), it is listed again whenever it
 * changed; past it, at most once per RESCAN_MS: anyone may fill /var/tmp and change it all the
 * time, and listing 100,000 names costs 70 ms.
 */
const EXACT_NAMES = 4096
const RESCAN_MS = 1000

/**
 * sharedRegistriesByUid(), listed again only when /var/tmp changed (see EXACT_NAMES); the same map
 * while it did not. `parent` and `now` are /var/tmp and the clock, but for tests.
 */
export function cachedSharedRegistries(parent: string = SHARED_PARENT, now: () => number = Date.now): () => ReadonlyMap<number, readonly string[]> {
  let cached: { stamp: string | null; at: number; names: number; found: Map<number, string[]> } | null = null
  return () => {
    const at = now()
    let stamp: string | null = null
    try {
      const info = statSync(parent, { bigint: true })
      if (at - Number(info.ctimeMs) > SETTLED_MS) stamp = `${info.dev}:${info.ino}:${info.ctimeNs}`
    } catch {
      // no /var/tmp: nothing there
    }
    if (cached && stamp !== null && cached.stamp === stamp) return cached.found
    if (cached && cached.names > EXACT_NAMES && at - cached.at < RESCAN_MS) return cached.found
    const { found, names } = scanShared(parent)
    cached = { stamp, at, names, found }
    return found
  }
}

function makeFolder(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return
    throw new TendError(
      'TEND_ERR_HOME_UNSAFE',
      { path: dir, detail: `the registry of tend homes cannot be made: ${(error as Error).message}` },
      { cause: error },
    )
  }
}
