import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { cachedKnownHomes, REGISTRY_IN_HOME } from '../store/home-registry.js'
import { cachedSharedRegistries } from '../store/registry-folders.js'
import { cachedPasswdUsers, type PasswdUser } from './passwd-users.js'
import type { ProtectedPlace } from './path-policy.js'
import { foldersOnTheWay, HOME_SECRETS } from './secret-paths.js'
import { placeInHome, userHome } from './user-links.js'

/**
 * What every user of the machine keeps apart, for a daemon whose tasks act as someone else: a
 * root daemon's tasks on their own identity (a folder of user X is idmapped to them, so in it they
 * have X's rights), or on taskUser (X itself). Its own user's places are not enough there:
 *   - each user's home (passwd): a cwd or writable path that is or holds it is refused (it would
 *     hand over the user's shell start-up files, keys, everything); one inside it, a project, is fine;
 *   - each user's secret paths (secret-paths.ts): refused when a path is, holds or lies in one; masked;
 *   - every tend home any user's registry lists, and those registries: refused and masked like
 *     the daemon's own.
 * A user's links are followed only to that user's own places (user-links.ts). Asked per task
 * (admission and launch), so every part is kept until the files it was read from change:
 * /etc/passwd, /var/tmp, each registry folder, each home and the folders on the way to its secret
 * paths and registry. The cost per task is one stat per user home (on a machine of more than
 * EXACT_HOMES homes, once a second) and per registry folder.
 */

export interface EveryUserPlaces {
  places: readonly ProtectedPlace[]
  masks: readonly string[]
}

/** A folder unchanged for this long is trusted to stay as read: its ctime ticks coarsely (and, unlike its mtime, no user can set it). */
const SETTLED_MS = 1000
/** Up to this many homes, each is looked at for every task; past it, once per RELOOK_MS. */
const EXACT_HOMES = 64
const RELOOK_MS = 1000

/** Builds the reader: call the answer per task. `shared` lists the registry folders in /var/tmp (the daemon's own reader of them, to list them once). */
export function everyUserPlaces(shared: () => ReadonlyMap<number, readonly string[]> = cachedSharedRegistries()): () => EveryUserPlaces {
  const users = cachedPasswdUsers()
  let folders: string[] = []
  const tendHomes = cachedKnownHomes(() => folders, false)
  let homes = new Map<string, () => HomeFacts | null>()
  let basis: readonly PasswdUser[] | null = null
  let owners: Array<() => HomeFacts | null> = []
  let last: { parts: unknown[]; view: EveryUserPlaces } | null = null
  let facts: Array<HomeFacts | null> = []
  let lastLook: number | null = null
  let lookedWith: readonly PasswdUser[] | null = null
  return () => {
    const listed = users()
    if (basis !== listed) {
      basis = listed
      // One entry per home folder (several system users share /bin or /nonexistent).
      const kept = new Map<string, () => HomeFacts | null>()
      const seen = new Set<string>()
      owners = []
      for (const user of listed) {
        if (user.home === null || seen.has(user.home)) continue
        seen.add(user.home)
        const key = `${user.uid}:${user.name}:${user.home}`
        const read = homes.get(key) ?? cachedHomeFacts(user)
        kept.set(key, read)
        owners.push(read)
      }
      homes = kept
    }
    // Exact on a machine of a few dozen homes; on one of thousands, each is looked at again once a
    // second at most (a new user's home at once: the user database has changed).
    const now = Date.now()
    if (owners.length <= EXACT_HOMES || lastLook === null || listed !== lookedWith || now - lastLook >= RELOOK_MS) {
      facts = owners.map((read) => read())
      lastLook = now
      lookedWith = listed
    }
    // The registry in each home that is its user's, and every one in /var/tmp (of uids the user
    // database does not know too: a container's arbitrary uid).
    const registries = [...facts.flatMap((each) => (each?.registry ? [each.registry] : [])), ...[...shared().values()].flat()]
    if (registries.length !== folders.length || registries.some((folder, index) => folder !== folders[index])) folders = registries
    const found = tendHomes()
    const parts = [folders, found, ...facts]
    if (last && last.parts.length === parts.length && last.parts.every((part, index) => part === parts[index])) return last.view
    last = { parts, view: describe(facts, folders, found) }
    return last.view
  }
}

/** A user's home as it is now: what it protects and masks, and its registry of tend homes when it has one there. */
interface HomeFacts {
  places: ProtectedPlace[]
  masks: string[]
  /** The real path of the registry folder in the home, when the home is the user's own and it is there. */
  registry: string | null
}

function describe(facts: ReadonlyArray<HomeFacts | null>, registries: readonly string[], tendHomes: readonly string[]): EveryUserPlaces {
  const places: ProtectedPlace[] = []
  const masks: string[] = []
  for (const each of facts) {
    if (each === null) continue
    places.push(...each.places)
    masks.push(...each.masks)
  }
  for (const home of tendHomes) places.push({ path: home, what: 'a tend home (TEND_HOME: sockets, spool, logs)' })
  masks.push(...tendHomes)
  for (const registry of registries) if (existsSync(registry)) places.push({ path: registry, what: 'a registry of tend homes' })
  return { places, masks }
}

/** The folders of a home that its facts depend on besides the home: those on the way to its secret paths and its registry. */
const WATCHED_IN_HOME = foldersOnTheWay([...HOME_SECRETS, REGISTRY_IN_HOME])

/**
 * A home's facts, read again when the home or one of the folders on the way to its secret paths
 * or registry (`.config`, `.local/state`) changed: a secret path appears, goes, or becomes another
 * link only by a change of the folder that holds it. A folder that did not exist is not asked
 * again: making it changes the folder above it.
 */
function cachedHomeFacts(user: PasswdUser): () => HomeFacts | null {
  const home = user.home!
  let cached: { stamps: string[]; parents: string[]; facts: HomeFacts | null } | null = null
  return () => {
    const stamps: string[] = []
    const now = Date.now()
    let settled = true
    for (const path of [home, ...(cached?.parents ?? [])]) {
      const info = statOrNone(path)
      if (info === undefined) {
        stamps.push('none')
        continue
      }
      if (now - Number(info.ctimeMs) <= SETTLED_MS) settled = false
      stamps.push(`${info.dev}:${info.ino}:${info.ctimeNs}`)
    }
    if (cached && settled && cached.stamps.length === stamps.length && cached.stamps.every((stamp, index) => stamp === stamps[index])) return cached.facts
    if (stamps[0] === 'none') {
      cached = settled ? { stamps, parents: [], facts: null } : null
      return null
    }
    const facts = readHomeFacts(user)
    const parents = WATCHED_IN_HOME.map((parent) => join(home, parent)).filter((path) => existsSync(path))
    // The stamps of the parents found now, for the next comparison.
    const parentStamps = parents.map((path) => {
      const info = statOrNone(path)
      if (info && now - Number(info.ctimeMs) <= SETTLED_MS) settled = false
      return info ? `${info.dev}:${info.ino}:${info.ctimeNs}` : 'none'
    })
    cached = settled ? { stamps: [stamps[0]!, ...parentStamps], parents, facts } : null
    return facts
  }
}

function readHomeFacts(user: PasswdUser): HomeFacts | null {
  const home = userHome(user.home!, user.uid)
  if (home === null) return null
  const who = `${user.name} (uid ${user.uid})`
  const places: ProtectedPlace[] = [{ path: home.path, what: `the home of ${who}`, holdsProjects: true }]
  // A home that leads elsewhere than the user's own: only its own path is the user's.
  if (!home.followed) return { places, masks: [], registry: null }
  const masks: string[] = []
  for (const relative of HOME_SECRETS) {
    const secret = placeInHome(home.path, relative, user.uid)
    if (secret === null) continue
    places.push({ path: secret.path, what: `a secret path of ${who}` })
    // A link's own path is never a mask: a mount on it would land where it leads.
    if (secret.followed) masks.push(secret.path)
  }
  // As homeRegistryDir: a user keeps its registry in its home when the home is its own.
  let registry: string | null = null
  if (statOrNone(home.path)?.uid === BigInt(user.uid)) {
    const found = placeInHome(home.path, REGISTRY_IN_HOME, user.uid)
    if (found?.followed && statOrNone(found.path)?.isDirectory()) registry = found.path
    else if (found) places.push({ path: found.path, what: `a registry of tend homes of ${who}` })
  }
  return { places, masks, registry }
}

/** Its stat, or undefined when it is missing or cannot be reached (ENOENT raises no exception: most homes lack most paths). */
function statOrNone(path: string) {
  try {
    return statSync(path, { bigint: true, throwIfNoEntry: false })
  } catch {
    return undefined
  }
}
