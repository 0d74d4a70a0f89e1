import { createHash } from 'node:crypto'
import { lstatSync, mkdirSync, readdirSync, realpathSync, renameSync, rmSync, statSync } from 'node:fs'
import { userInfo } from 'node:os'
import { isAbsolute, join } from 'node:path'
import { TendError } from '../../protocol/index.js'
import { readRegularFileSync, writeRegularFileSync } from '../../spool/index.js'
import { holdsMarker } from './home-marker.js'
import { ownFolderProblem } from './home-safety.js'

/**
 * The per-user registry of tend homes: every daemon records its home there at start, and every
 * daemon of that user hides every home it lists from its sandboxes and refuses them as folders to
 * write. Its place depends on the uid alone, never on the daemon's environment: two daemons of one
 * user started with different HOME or XDG_STATE_HOME must find each other.
 *   - `<passwd home>/.local/state/tend-homes` when the user's home in the user database (not
 *     $HOME) is a folder the user owns;
 *   - else `/var/tmp/tend-homes-<uid>` (service users whose home is /nonexistent).
 * Either way the daemon checks it before use (its own, 0700 or at least not writable by others,
 * not a link) and refuses to start otherwise.
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

/** Where `user`'s daemons record their homes. */
export function homeRegistryDir(user: RegistryUser): string {
  if (user.passwdHome && isAbsolute(user.passwdHome)) {
    const info = statSync(user.passwdHome, { throwIfNoEntry: false })
    if (info?.isDirectory() && info.uid === user.uid) return join(user.passwdHome, '.local', 'state', 'tend-homes')
  }
  return `/var/tmp/tend-homes-${user.uid}`
}

/**
 * Makes the registry folder if missing (0700) and checks it is this user's own: a folder (not a
 * link), owned by uid, writable by nobody else. Throws TEND_ERR_HOME_UNSAFE naming what to fix.
 */
export function prepareRegistry(dir: string, uid: number): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
  } catch (error) {
    throw new TendError('TEND_ERR_HOME_UNSAFE', { path: dir, detail: `the registry of tend homes cannot be made: ${(error as Error).message}` }, { cause: error })
  }
  const problem = ownFolderProblem(dir, uid)
  if (problem) throw new TendError('TEND_ERR_HOME_UNSAFE', { path: dir, detail: `the registry of tend homes ${problem}` })
}

/** One file per home, `<hash of its real path>.json`: the home, and the daemon that last started there. */
interface RegistryEntry {
  home: string
  pid: number
}

/** An entry is a few dozen bytes: anything much larger is not one. */
const MAX_ENTRY_BYTES = 64 * 1024

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
 * Real paths of every home the registry lists that still exists and holds its marker; an entry
 * whose folder is gone, or no longer a home, is removed (best effort).
 */
export function knownHomes(dir: string): string[] {
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return []
  }
  const homes = new Set<string>()
  for (const name of names) {
    if (!name.endsWith('.json')) continue
    const file = join(dir, name)
    const home = readEntry(file)
    if (home === null) continue
    if (!isHome(home)) {
      rmSync(file, { force: true })
      continue
    }
    homes.add(realOrSelf(home))
  }
  return [...homes]
}

/** A registry unchanged for this long is trusted to stay as read: its folder's mtime ticks coarsely. */
const SETTLED_MS = 1000

/**
 * knownHomes() for a caller that asks per task: the registry is read again only when its folder
 * has changed (a daemon registered, an entry was pruned). A folder changed within the last second
 * is read every time: a change in the same tick of its mtime would otherwise be missed.
 */
export function cachedKnownHomes(dir: string): () => string[] {
  let cached: { stamp: string; homes: string[] } | null = null
  return () => {
    let stamp: string | null = null
    try {
      const info = statSync(dir, { bigint: true })
      if (Date.now() - Number(info.mtimeMs) > SETTLED_MS) stamp = `${info.dev}:${info.ino}:${info.mtimeNs}`
    } catch {
      // No registry: nothing registered.
    }
    if (stamp !== null && cached?.stamp === stamp) return cached.homes
    const homes = knownHomes(dir)
    cached = stamp === null ? null : { stamp, homes }
    return homes
  }
}

/** The home an entry names, or null when it is not an entry (unreadable, not JSON, not an absolute path). */
function readEntry(file: string): string | null {
  try {
    const entry = JSON.parse(readRegularFileSync(file, MAX_ENTRY_BYTES).toString('utf8')) as Partial<RegistryEntry>
    return typeof entry.home === 'string' && isAbsolute(entry.home) && entry.home !== '/' ? entry.home : null
  } catch {
    // Unreadable, half-written by hand, or not a regular file: left alone, it names nothing.
    return null
  }
}

function isHome(path: string): boolean {
  return lstatSync(path, { throwIfNoEntry: false })?.isDirectory() === true && holdsMarker(path)
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
