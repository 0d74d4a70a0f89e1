import { lstatSync, rmSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { HOME_MARKER } from '../../protocol/index.js'
import { writeRegularFileSync } from '../../spool/index.js'

/**
 * Every tend home holds HOME_MARKER, made by its daemon at every start: a home is recognised by
 * itself, not only by a registry that may not know it (another user's HOME, a registry removed or
 * never read). A marker counts only where a home could be: a regular file owned by its folder's
 * owner, in a folder no one else may write (a daemon refuses any other home, home-safety.ts). So
 * anyone's entry in a shared folder (/var/tmp, 1777) says nothing; a marker a task plants in its
 * own folders only makes those folders refused to later tasks.
 */

/** What the marker says to a person who finds it. */
const MARKER_TEXT =
  'This folder is a tend home (TEND_HOME): sockets, spool, logs and config.json of a tend daemon.\n' +
  'Sandboxed tasks may not be given it, nor any folder inside it or around it, to write; it is hidden from them.\n'

/** Makes the marker in a home (kept as it is when there). Synchronous: once, at start. */
export function markHome(home: string): void {
  if (holdsMarker(home)) return
  // An entry of that name that does not count (another owner's, not a file) is replaced.
  rmSync(join(home, HOME_MARKER), { force: true, recursive: true })
  writeRegularFileSync(join(home, HOME_MARKER), MARKER_TEXT, 0o644)
}

export function holdsMarker(dir: string): boolean {
  let marker, folder
  try {
    marker = lstatSync(join(dir, HOME_MARKER), { throwIfNoEntry: false })
    // Most folders hold none: the folder itself is only looked at when one is there.
    if (marker === undefined || !marker.isFile()) return false
    folder = statSync(dir, { throwIfNoEntry: false })
  } catch {
    // Not a folder (ENOTDIR), or one out of reach: no home there that this daemon could mask either.
    return false
  }
  return folder !== undefined && folder.uid === marker.uid && (folder.mode & 0o022) === 0
}

/**
 * The tend home `real` is or lies in: the nearest folder at or above it that holds the marker, or
 * null. One lstat per level of the path: a few microseconds, affordable for every task.
 */
export function markedHomeAround(real: string): string | null {
  for (let dir = real; ; dir = dirname(dir)) {
    if (holdsMarker(dir)) return dir
    if (dir === '/') return null
  }
}
