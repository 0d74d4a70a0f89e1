import { existsSync, realpathSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { cachedKnownHomes } from '../store/home-registry.js'
import { cachedSharedRegistries, registryFolders } from '../store/registry-folders.js'
import { cachedPasswdUsers, type PasswdUser } from './passwd-users.js'
import type { ProtectedPlace } from './path-policy.js'
import { HOME_SECRET_PARENTS, homeSecretPaths } from './secret-paths.js'

/**
 * What every user of the machine keeps apart, for a daemon whose tasks act as someone else: a
 * root daemon's tasks on their own identity (a folder of user X is idmapped to them, so in it they
 * have X's rights), or on taskUser (X itself). Its own user's places are not enough there:
 *   - each user's home (passwd): a cwd or writable path that is or holds it is refused (it would
 *     hand over the user's shell start-up files, keys, everything); one inside it, a project, is fine;
 *   - each user's secret paths (secret-paths.ts): refused when a path is, holds or lies in one; masked;
 *   - every tend home any user's registry lists, and those registries: refused and masked like
 *     the daemon's own.
 * Asked per task (admission and launch), so every part is kept until the files it was read from
 * change: /etc/passwd, /var/tmp, each registry folder, each home and the folders holding its
 * secret paths. The cost per task is one stat per user home (on a machine of more than
 * EXACT_HOMES homes, once a second) and per registry folder.
 */

export interface EveryUserPlaces {
  places: readonly ProtectedPlace[]
  masks: readonly string[]
}

/** A folder unchanged for this long is trusted to stay as read: its mtime ticks coarsely. */
const SETTLED_MS = 1000
/** Up to this many homes, each is looked at for every task; past it, once per RELOOK_MS. */
const EXACT_HOMES = 64
const RELOOK_MS = 1000

/** Builds the reader: call the answer per task. */
export function everyUserPlaces(): () => EveryUserPlaces {
  const users = cachedPasswdUsers()
  const shared = cachedSharedRegistries()
  let folders: string[] = []
  const tendHomes = cachedKnownHomes(() => folders, false)
  let homes = new Map<string, () => HomeFacts | null>()
  let basis: { users: readonly PasswdUser[]; shared: ReadonlyMap<number, readonly string[]> } | null = null
  let owners: Array<{ user: PasswdUser; facts: () => HomeFacts | null }> = []
  let last: { parts: unknown[]; view: EveryUserPlaces } | null = null
  let facts: Array<HomeFacts | null> = []
  let lastLook: number | null = null
  let lookedWith: readonly PasswdUser[] | null = null
  return () => {
    const listed = users()
    const sharedNow = shared()
    if (basis?.users !== listed) {
      // One entry per home folder (several system users share /bin or /nonexistent).
      const kept = new Map<string, () => HomeFacts | null>()
      owners = []
      for (const user of listed) {
        if (user.home === null || kept.has(user.home)) continue
        const read = homes.get(user.home) ?? cachedHomeFacts(user.home)
        kept.set(user.home, read)
        owners.push({ user, facts: read })
      }
      homes = kept
    }
    if (basis?.users !== listed || basis.shared !== sharedNow) {
      basis = { users: listed, shared: sharedNow }
      // Registries of uids the user database does not know (a container's arbitrary uid) too.
      const known = new Set(listed.map((user) => user.uid))
      folders = [...new Set([...listed.flatMap((user) => registryFolders({ uid: user.uid, passwdHome: user.home }, sharedNow)), ...[...sharedNow].filter(([uid]) => !known.has(uid)).flatMap(([, dirs]) => dirs)])]
    }
    const found = tendHomes()
    // Exact on a machine of a few dozen homes; on one of thousands, each is looked at again once a
    // second at most (a new user's home at once: the user database has changed).
    const now = Date.now()
    if (owners.length <= EXACT_HOMES || lastLook === null || listed !== lookedWith || now - lastLook >= RELOOK_MS) {
      facts = owners.map((owner) => owner.facts())
      lastLook = now
      lookedWith = listed
    }
    const parts = [folders, found, ...facts]
    if (last && last.parts.length === parts.length && last.parts.every((part, index) => part === parts[index])) return last.view
    last = { parts, view: describe(owners.map((owner, index) => ({ user: owner.user, facts: facts[index]! })), folders, found) }
    return last.view
  }
}

/** A user's home as it is now: its real path and the real paths of the secret paths it holds. */
interface HomeFacts {
  home: string
  secrets: string[]
}

function describe(owners: Array<{ user: PasswdUser; facts: HomeFacts | null }>, registries: readonly string[], tendHomes: readonly string[]): EveryUserPlaces {
  const places: ProtectedPlace[] = []
  const masks: string[] = []
  for (const { user, facts } of owners) {
    if (facts === null) continue
    places.push({ path: facts.home, what: `the home of ${user.name} (uid ${user.uid})`, holdsProjects: true })
    for (const secret of facts.secrets) places.push({ path: secret, what: `a secret path of ${user.name} (uid ${user.uid})` })
    masks.push(...facts.secrets)
  }
  for (const home of tendHomes) places.push({ path: home, what: 'a tend home (TEND_HOME: sockets, spool, logs)' })
  masks.push(...tendHomes)
  for (const registry of registries) if (existsSync(registry)) places.push({ path: realOrSelf(registry), what: "a registry of tend homes" })
  return { places, masks }
}

/**
 * A home's facts, read again when the home or one of the folders that hold its secret paths
 * (`.config`, `.cargo`) changed: a secret path appears, goes, or becomes another link only by a
 * change of the folder that holds it. A folder that did not exist is not asked again: making it
 * changes the home.
 */
function cachedHomeFacts(home: string): () => HomeFacts | null {
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
      if (now - Number(info.mtimeMs) <= SETTLED_MS) settled = false
      stamps.push(`${info.dev}:${info.ino}:${info.mtimeNs}`)
    }
    if (cached && settled && cached.stamps.length === stamps.length && cached.stamps.every((stamp, index) => stamp === stamps[index])) return cached.facts
    if (stamps[0] === 'none') {
      cached = settled ? { stamps, parents: [], facts: null } : null
      return null
    }
    const facts = readHomeFacts(home)
    const parents = HOME_SECRET_PARENTS.map((parent) => join(home, parent)).filter((path) => existsSync(path))
    // The stamps of the parents found now, for the next comparison.
    const parentStamps = parents.map((path) => {
      const info = statOrNone(path)
      if (info && now - Number(info.mtimeMs) <= SETTLED_MS) settled = false
      return info ? `${info.dev}:${info.ino}:${info.mtimeNs}` : 'none'
    })
    cached = settled ? { stamps: [stamps[0]!, ...parentStamps], parents, facts } : null
    return facts
  }
}

function readHomeFacts(home: string): HomeFacts | null {
  let real: string
  try {
    real = realpathSync.native(home)
    if (real === '/' || !statSync(real).isDirectory()) return null
  } catch {
    return null
  }
  const secrets: string[] = []
  for (const path of homeSecretPaths(home)) {
    if (!existsSync(path)) continue
    try {
      secrets.push(realpathSync.native(path))
    } catch {
      // gone meanwhile
    }
  }
  return { home: real, secrets }
}

/** Its stat, or undefined when it is missing or cannot be reached (ENOENT raises no exception: most homes lack most paths). */
function statOrNone(path: string) {
  try {
    return statSync(path, { bigint: true, throwIfNoEntry: false })
  } catch {
    return undefined
  }
}

function realOrSelf(path: string): string {
  try {
    return realpathSync.native(path)
  } catch {
    return path
  }
}
