import { createHash } from 'node:crypto'
import { lstatSync, opendirSync, readdirSync, realpathSync, renameSync, rmSync, statSync, type Dir } from 'node:fs'
import { userInfo } from 'node:os'
import { isAbsolute, join } from 'node:path'
import { readRegularFileSync, writeRegularFileSync } from '../../spool/index.js'
import { holdsMarker } from './home-marker.js'

/**
 * The per-user registry of tend homes: every daemon records its home there at start, and every
 * daemon of that user hides every home it lists from its sandboxes and refuses them as folders to
 * write. Its place depends on the uid alone, never on the daemon's environment: two daemons of one
 * user started with different HOME or XDG_STATE_HOME must find each other.
 *   - `<passwd home>/.local/state/tend-homes` when the user's home in the user database (not
 *     $HOME) is a folder the user owns;
 *   - else `/var/tmp/tend-homes-<uid>` (service users whose home is /nonexistent), or another
 *     folder of that user's there when someone else made that one first (registry-folders.ts).
 * Either way the daemon checks it before use (its own, 0700 or at least not writable by others,
 * not a link).
 *
 * An entry stays as long as its folder exists and holds the home marker: a stopped daemon's home
 * is hidden and refused too (its config.json is read again at its next start).
 */

/** Who the registry is for: a uid and its home in the user database (null: none known). */
export interface RegistryUser {
  uid: number
  passwdHome: string | null
}

/** This process's user, from the user database (getpwuid: $HOME plays no part). */
export function currentRegistryUser(): RegistryUser {
  const uid = process.getuid!()
  let passwdHome: string | null = null
  try {
    passwdHome = userInfo().homedir || null
  } catch {
    // a uid without a user database entry (a container's arbitrary uid)
  }
  return { uid, passwdHome }
}

/** Where in its home a user whose home is its own keeps its registry. */
export const REGISTRY_IN_HOME = join('.local', 'state', 'tend-homes')

/** Where `user`'s daemons usually record their homes (registry-folders.ts: where they do). */
export function homeRegistryDir(user: RegistryUser): string {
  if (user.passwdHome && isAbsolute(user.passwdHome)) {
    const info = statOrNone(user.passwdHome)
    if (info?.isDirectory() && Number(info.uid) === user.uid) return join(user.passwdHome, REGISTRY_IN_HOME)
  }
  return `/var/tmp/tend-homes-${user.uid}`
}

/** One file per home, `<hash of its real path>.json`: the home, and the daemon that last started there. */
interface RegistryEntry {
  home: string
  pid: number
}

/**
 * How much of a registry is read: names looked at, entries (`*.json`) opened, and bytes read. A
 * user has a few homes and an entry is about a hundred bytes, so another user's registry is read
 * only as far as a few dozen real entries go: past that, what that user wrote there costs every
 * reader and protects nothing more. A daemon's own registry (it prunes it) is its own user's alone.
 */
interface RegistryBounds {
  names: number
  entries: number
  bytes: number
}
const OWN_REGISTRY: RegistryBounds = { names: 4096, entries: 1024, bytes: 1024 * 1024 }
const OTHER_REGISTRY: RegistryBounds = { names: 256, entries: 64, bytes: 64 * 1024 }

/** An entry holds a path (at most PATH_MAX, 4096 bytes) and a pid: anything larger is not one. */
const MAX_ENTRY_BYTES = 8 * 1024

/**
 * Records a home (its real path) in the registry, replacing its earlier entry: written whole (a
 * temporary file, renamed). Synchronous: once, at start, before the socket listens.
 */
export function registerHome(dir: string, home: string, pid: number = process.pid): void {
  const realHome = realpathSync(home)
  const hash = homeHash(realHome)
  const file = join(dir, `${hash}.json`)
  const temporary = `${file}.${pid}.tmp`
  const entry: RegistryEntry = { home: realHome, pid }
  writeRegularFileSync(temporary, `${JSON.stringify(entry)}\n`)
  renameSync(temporary, file)
  // Entries of an older tend were one per daemon process: `<hash>-<pid>.json`.
  for (const name of readdirSync(dir)) if (name.startsWith(`${hash}-`) && name.endsWith('.json')) rmSync(join(dir, name), { force: true })
}

/**
 * Real paths of every home the registry lists that still exists and holds its marker, read within
 * its bounds (RegistryBounds). An entry whose folder is gone, or no longer a home, is removed (best
 * effort) when `prune` (the registry is the reader's own); another user's registry is only read.
 */
export function knownHomes(dir: string, prune = true): string[] {
  let folder: Dir
  try {
    folder = opendirSync(dir)
  } catch {
    return []
  }
  const bounds = prune ? OWN_REGISTRY : OTHER_REGISTRY
  const homes = new Set<string>()
  let names = 0
  let entries = 0
  let bytes = 0
  try {
    // One name at a time: a folder of a million names is not listed whole to look at a few.
    for (let found = folder.readSync(); found !== null; found = folder.readSync()) {
      if (++names > bounds.names) break
      if (!found.name.endsWith('.json')) continue
      if (++entries > bounds.entries || bytes >= bounds.bytes) break
      const file = join(dir, found.name)
      const entry = readEntry(file)
      bytes += entry.bytes
      if (entry.home === null) continue
      if (!isHome(entry.home)) {
        if (prune) rmSync(file, { force: true })
        continue
      }
      homes.add(realOrSelf(entry.home))
    }
  } catch {
    // The folder went, or became unreadable, while it was read: what was found stands.
  } finally {
    folder.closeSync()
  }
  return [...homes]
}

/**
 * A registry unchanged for this long is trusted to stay as read: its folder's ctime ticks coarsely.
 * The ctime, not the mtime: its owner can set the mtime (`touch -d 2030`: never settled), no one the ctime.
 */
const SETTLED_MS = 1000

/**
 * knownHomes() of every folder `folders()` names, for a caller that asks per task: each registry
 * is read again only when its folder has changed (a daemon registered, an entry was pruned). A
 * folder changed within the last second is read every time: a change in the same tick of its ctime
 * would otherwise be missed. The same array comes back while nothing changed.
 */
export function cachedKnownHomes(folders: () => readonly string[], prune = true): () => string[] {
  const caches = new Map<string, () => string[]>()
  let last: { parts: string[][]; homes: string[] } | null = null
  return () => {
    const current = folders()
    const parts = current.map((dir) => {
      let read = caches.get(dir)
      if (!read) caches.set(dir, (read = cachedRegistry(dir, prune)))
      return read()
    })
    // A folder no longer asked for (gone from /var/tmp, its user's home moved) is forgotten.
    if (caches.size > current.length) for (const dir of caches.keys()) if (!current.includes(dir)) caches.delete(dir)
    if (last && last.parts.length === parts.length && last.parts.every((part, index) => part === parts[index])) return last.homes
    last = { parts, homes: [...new Set(parts.flat())] }
    return last.homes
  }
}

function cachedRegistry(dir: string, prune: boolean): () => string[] {
  let cached: { stamp: string; homes: string[] } | null = null
  const none: string[] = []
  return () => {
    const info = statOrNone(dir)
    if (info === undefined) {
      cached = null
      return none
    }
    const stamp = Date.now() - Number(info.ctimeMs) > SETTLED_MS ? `${info.dev}:${info.ino}:${info.ctimeNs}` : null
    if (stamp !== null && cached?.stamp === stamp) return cached.homes
    const homes = knownHomes(dir, prune)
    cached = stamp === null ? null : { stamp, homes }
    return homes
  }
}

/** The folder's stat, or undefined when there is none (or it cannot be reached). Most users have no registry: ENOENT raises no exception. */
function statOrNone(dir: string) {
  try {
    return statSync(dir, { bigint: true, throwIfNoEntry: false })
  } catch {
    return undefined
  }
}

/** The home an entry names (null when it is not an entry: unreadable, not JSON, not an absolute path), and the bytes read. */
function readEntry(file: string): { home: string | null; bytes: number } {
  let data: Buffer
  try {
    data = readRegularFileSync(file, MAX_ENTRY_BYTES)
  } catch {
    // Unreadable, too large (refused on its size before a byte is read), or not a regular file: it names nothing.
    return { home: null, bytes: 0 }
  }
  try {
    const entry = JSON.parse(data.toString('utf8')) as Partial<RegistryEntry>
    return { home: typeof entry.home === 'string' && isAbsolute(entry.home) && entry.home !== '/' ? entry.home : null, bytes: data.length }
  } catch {
    // Half-written by hand: left alone, it names nothing.
    return { home: null, bytes: data.length }
  }
}

/** Whether an entry's path is a home now. An entry is its user's text: a path through a file (ENOTDIR) or a folder out of reach is just not one. */
function isHome(path: string): boolean {
  try {
    return lstatSync(path, { throwIfNoEntry: false })?.isDirectory() === true && holdsMarker(path)
  } catch {
    return false
  }
}

function homeHash(realHome: string): string {
  return createHash('sha256').update(realHome).digest('hex').slice(0, 16)
}

function realOrSelf(path: string): string {
  try {
    return realpathSync.native(path)
  } catch {
    return path
  }
}
