import { lstatSync, readlinkSync } from 'node:fs'
import { isAbsolute, join, resolve } from 'node:path'
import { isWithin } from './path-policy.js'

/**
 * Which of another user's symbolic links the daemon follows when it works out that user's places
 * (every-user-places.ts). A user plants links wherever it may write, its home first: followed
 * blindly, `~/.kube -> /` made the whole file system that user's secret path (every task refused),
 * `~/.ssh -> /usr` masked /usr in every task, and `~/.aws -> /var/tmp/proj` refused someone else's
 * project. A user may protect its own places only, so:
 *   - a path in the user's home is followed through links only to what lies inside that home (not
 *     the home itself) and is owned by the user; otherwise only its own path counts, which lies in
 *     the home and is protected with it;
 *   - the home itself (/etc/passwd names it: root's choice) is followed through root's links, and
 *     through anyone else's only to a folder the user owns; otherwise only its own path counts.
 * Decided on lstat of each component as the kernel has it, never on what a link says it is.
 */

/** A place of the user: its real path (followed), or the path of a link that was not followed. */
export interface UserPlace {
  path: string
  /** False: a link led elsewhere than the user's own; `path` is the link's own path. */
  followed: boolean
}

/** A path resolved one component at a time: where it leads and who owns each link on the way. */
interface Resolved {
  real: string
  linkOwners: number[]
}

/** As the kernel: past this many links a path does not resolve (ELOOP). */
const MAX_LINKS = 40

/** The user's home as the daemon takes it, or null when it is not a folder (or is /). */
export function userHome(home: string, uid: number): UserPlace | null {
  const resolved = resolvePath('/', home)
  if (resolved === null || resolved.real === '/') return null
  const info = lstatOrNone(resolved.real)
  if (!info?.isDirectory()) return null
  if (resolved.linkOwners.every((owner) => owner === 0) || info.uid === uid) return { path: resolved.real, followed: true }
  return { path: resolve(home), followed: false }
}

/** `relative` under the user's real home as the daemon takes it, or null when there is nothing there. */
export function placeInHome(realHome: string, relative: string, uid: number): UserPlace | null {
  const resolved = resolvePath(realHome, relative)
  if (resolved === null) return null
  if (resolved.linkOwners.length === 0) return { path: resolved.real, followed: true }
  const info = lstatOrNone(resolved.real)
  if (info !== undefined && info.uid === uid && resolved.real !== realHome && isWithin(resolved.real, realHome)) return { path: resolved.real, followed: true }
  return { path: join(realHome, relative), followed: false }
}

/**
 * `path` (absolute, or relative to the real folder `start`) resolved as the kernel would, or null
 * when it does not (a component missing or out of reach, a loop, a file in the middle).
 */
function resolvePath(start: string, path: string): Resolved | null {
  const pending = components(path)
  let current = isAbsolute(path) ? '/' : start
  const linkOwners: number[] = []
  while (pending.length > 0) {
    const name = pending.shift()!
    if (name === '..') {
      current = current === '/' ? '/' : current.slice(0, current.lastIndexOf('/')) || '/'
      continue
    }
    const next = current === '/' ? `/${name}` : `${current}/${name}`
    const info = lstatOrNone(next)
    if (info === undefined) return null
    if (info.isSymbolicLink()) {
      if (linkOwners.length >= MAX_LINKS) return null
      linkOwners.push(info.uid)
      let target: string
      try {
        target = readlinkSync(next)
      } catch {
        return null
      }
      if (isAbsolute(target)) current = '/'
      pending.unshift(...components(target))
      continue
    }
    if (pending.length > 0 && !info.isDirectory()) return null
    current = next
  }
  return { real: current, linkOwners }
}

function components(path: string): string[] {
  return path.split('/').filter((part) => part !== '' && part !== '.')
}

/** Its lstat, or undefined when it is missing or cannot be reached (ENOENT raises no exception: most homes lack most paths). */
function lstatOrNone(path: string) {
  try {
    return lstatSync(path, { throwIfNoEntry: false })
  } catch {
    return undefined
  }
}
