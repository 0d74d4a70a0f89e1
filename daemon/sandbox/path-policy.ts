import { lstatSync, realpathSync, statSync } from 'node:fs'
import { dirname, resolve, sep } from 'node:path'
import { HOME_MARKER, TendError, type SandboxProfile } from '../../protocol/index.js'
import { markedHomeAround } from '../store/home-marker.js'
import { checkCwdSync } from '../spawn/cwd-check.js'

/**
 * Which folders a sandboxed task may be given to write, decided on real paths: every symlink is
 * resolved first, then every refusal applies to what the path really is. A path is refused when it
 * is, contains or lies inside a protected place, so that neither a link the task made itself nor
 * a folder around a protected one can hand it over.
 */

/** A folder as it was when the task was accepted: its real path, its identity and its owner. */
export interface PinnedPath {
  path: string
  dev: string
  ino: string
  uid: number
  gid: number
}

/** A folder the task sees through an idmapped mount: its owner (uid, gid) shows as the task's user. */
export interface IdmappedRoot {
  path: string
  uid: number
  gid: number
}

/** A place no sandboxed task may write, with what it is (for the refusal's message). */
export interface ProtectedPlace {
  path: string
  what: string
  /** Folders inside it may be given (a user's home holds projects): only it, and folders around it, are refused. */
  holdsProjects?: boolean
}

/**
 * The system folders: the whole file system's programs, configuration, kernel and service state.
 * Binding one writable would replace the sandbox's own (/proc, /sys, /dev) or change the host.
 * /var/spool holds cron's and at's jobs, which run as their file's owner (a root daemon's task
 * writes a root-owned folder as root).
 */
const SYSTEM_FOLDERS = [
  '/proc',
  '/sys',
  '/dev',
  '/etc',
  '/usr',
  '/bin',
  '/sbin',
  '/lib',
  '/lib32',
  '/lib64',
  '/libx32',
  '/boot',
  '/run',
  '/var/run',
  '/var/lib',
  '/var/log',
  '/var/spool',
]

export interface TaskPaths {
  /** The cwd the task runs in: its real path under a sandbox, the path as given with `off`. */
  cwd: PinnedPath
  /** Every folder the task may write (cwd, or its git work tree's root, first), real and pinned; empty with `off`. */
  writable: PinnedPath[]
  /** The request's writable paths that do not exist: skipped, the task cannot write there. */
  skipped: string[]
  /**
   * Why the task cannot start: its cwd is missing or not a folder. Such a task is accepted and
   * ends `failed` with this reason without running (no folder to pin, nothing to check).
   */
  cwdProblem?: string
}

export interface PathRequest {
  profile: SandboxProfile
  cwd: string
  /** The task's own writable paths. */
  writablePaths: readonly string[]
  /** The daemon's configured writable paths (operator's, but checked the same way). */
  configWritablePaths: readonly string[]
  protectedPlaces: readonly ProtectedPlace[]
  /** The user sandboxed tasks run as when not the daemon's (taskUser, or their own identity): every folder must be reachable by it. */
  user?: { uid: number; gid: number } | null
  /** What that user is, for a refusal: `taskUser`, "the tasks' own identity". */
  userLabel?: string
  /** Folders it sees through idmapped mounts besides its writable ones (the daemon's HOME). */
  views?: readonly IdmappedRoot[]
  /** Its writable folders are idmapped onto it: how a folder of an owner shows (task-identity.ts, idmapOwner). */
  idmapWritable?: (ownerUid: number) => { uid: number; gid: number }
}

/** Resolves, checks and pins a task's cwd and writable paths; throws TEND_ERR_VALIDATION naming the field. */
export async function resolveTaskPaths(request: PathRequest): Promise<TaskPaths> {
  const { profile } = request
  // pin() below stats it synchronously anyway: a round trip through the thread pool first costs more than the call.
  const cwdProblem = checkCwdSync(request.cwd)
  if (cwdProblem) return { cwd: { path: request.cwd, dev: '0', ino: '0', uid: 0, gid: 0 }, writable: [], skipped: [], cwdProblem }
  if (profile === 'off') return { cwd: pin(request.cwd, request.cwd, 'cwd'), writable: [], skipped: [] }
  const places = [...SYSTEM_FOLDERS.map((path) => ({ path, what: 'a system folder' })), ...request.protectedPlaces]
  const cwd = pin(realPath(request.cwd, 'cwd'), request.cwd, 'cwd')
  refuseProtected(profile, 'cwd', request.cwd, cwd.path, places)
  // Which the tasks' user must reach: checked once every writable folder is known (each idmapped one opens the way to those inside).
  const needed = [{ field: 'cwd', given: request.cwd, real: cwd.path }]
  const writable: PinnedPath[] = []
  const skipped: string[] = []
  const add = (entry: PinnedPath) => {
    if (!writable.some((each) => each.path === entry.path)) writable.push(entry)
  }
  const root = gitWorkTreeRoot(cwd)
  // Widening to the work tree is a convenience: a root that may not be written is just not added.
  if (root !== null && !findProtected(root, places) && !findHome(root)) {
    let pinned: PinnedPath | null = null
    try {
      pinned = pin(root, root, 'cwd')
    } catch {
      // gone since it was found: nothing to widen to
    }
    if (pinned) add(pinned)
  }
  add(cwd)
  for (const [field, paths] of [
    ['writablePaths', request.writablePaths],
    ['writablePaths (daemon setting)', request.configWritablePaths],
  ] as const) {
    for (const path of paths) {
      // A writable path that does not exist yet is skipped, as bubblewrap's --bind-try did.
      let real: string | null
      try {
        real = realpathSync.native(path)
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code
        if (code !== 'ENOENT') throw invalid(field, `${path} cannot be used (${code})`)
        real = null
      }
      if (real === null) {
        if (field === 'writablePaths') skipped.push(path)
        continue
      }
      refuseProtected(profile, field, path, real, places)
      needed.push({ field, given: path, real })
      add(pin(real, path, field))
    }
  }
  // Ancestors first: a folder bound inside another must be mounted after it.
  writable.sort((a, b) => a.path.length - b.path.length)
  const { user } = request
  if (!user) return { cwd, writable, skipped }
  const { idmapWritable } = request
  const seen = [...(request.views ?? []), ...(idmapWritable ? writable.map((entry) => ({ path: entry.path, ...idmapWritable(entry.uid) })) : [])]
  for (const each of needed) refuseUnreachable(each.field, each.given, each.real, user, seen, request.userLabel ?? 'taskUser')
  // A work tree's root the user cannot reach is not widened to (it is a convenience).
  return { cwd, writable: writable.filter((entry) => reachableBy(`${entry.path}/.`, user, seen)), skipped }
}

/** Is `inner` the same path as `outer`, or inside it? Both real, absolute, without a trailing slash. */
export function isWithin(inner: string, outer: string): boolean {
  return inner === outer || outer === '/' || inner.startsWith(`${outer}${sep}`)
}

function findProtected(real: string, places: readonly ProtectedPlace[]): { place: ProtectedPlace; relation: string } | null {
  if (real === '/') return { place: { path: '/', what: 'the whole file system' }, relation: 'is' }
  for (const place of places) {
    if (real === place.path) return { place, relation: 'is' }
    if (isWithin(place.path, real)) return { place, relation: 'contains' }
    if (!place.holdsProjects && isWithin(real, place.path)) return { place, relation: 'lies inside' }
  }
  return null
}

/** A tend home `real` is or lies in, by the marker every home holds (home-marker.ts), as a refusal. */
function findHome(real: string): { place: ProtectedPlace; relation: string } | null {
  const home = markedHomeAround(real)
  if (home === null) return null
  return { place: { path: home, what: `a tend home (it holds ${HOME_MARKER}: sockets, spool, logs)` }, relation: home === real ? 'is' : 'lies inside' }
}

function refuseProtected(profile: SandboxProfile, field: string, given: string, real: string, places: readonly ProtectedPlace[]): void {
  const hit = findProtected(real, places) ?? findHome(real)
  if (!hit) return
  const alias = real !== resolve(given) ? ` (it is ${real})` : ''
  throw invalid(field, `under sandbox ${profile} ${given} would become writable${alias}, and it ${relationText(hit)}: choose a project folder, or sandbox off`)
}

function relationText(hit: { place: ProtectedPlace; relation: string }): string {
  return hit.relation === 'is' ? `is ${hit.place.what}` : `${hit.relation} ${hit.place.path}, ${hit.place.what}`
}

/**
 * Why a task's folders, pinned when it was accepted, may no longer be given to it, or null. A task
 * may wait in the queue for long: meanwhile a user's home or a tend home can appear inside its cwd
 * (useradd -m, a daemon started there), and it would get it to write. Asked at launch, on the same
 * real paths and places as at admission.
 */
export function protectedSinceAdmission(profile: SandboxProfile, paths: TaskPaths, protectedPlaces: readonly ProtectedPlace[]): string | null {
  if (profile === 'off' || paths.cwdProblem) return null
  const places = [...SYSTEM_FOLDERS.map((path) => ({ path, what: 'a system folder' })), ...protectedPlaces]
  for (const entry of paths.writable.some((each) => each.path === paths.cwd.path) ? paths.writable : [paths.cwd, ...paths.writable]) {
    const hit = findProtected(entry.path, places) ?? findHome(entry.path)
    if (hit) return `under sandbox ${profile} ${entry.path} would become writable, and it now ${relationText(hit)}: the task was not started`
  }
  return null
}

function refuseUnreachable(field: string, given: string, real: string, user: { uid: number; gid: number }, seen: readonly IdmappedRoot[], label: string): void {
  const blocked = blockingFolder(`${real}/.`, user, seen)
  if (blocked === null) return
  throw invalid(
    field,
    `${given} cannot be reached by the tasks' user (uid ${user.uid}, ${label}): it may not enter ${blocked}` +
      `. Let others enter that folder (chmod o+x ${blocked}), or choose a folder it can reach`,
  )
}

function realPath(path: string, field: string): string {
  try {
    return realpathSync.native(path)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    throw invalid(field, code === 'ENOENT' ? `${path} does not exist` : `${path} cannot be used (${code})`)
  }
}

function pin(path: string, given: string, field: string): PinnedPath {
  let info
  try {
    info = statSync(path, { bigint: true })
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    throw invalid(field, code === 'ENOENT' ? `${given} does not exist` : `${given} cannot be used (${code})`)
  }
  if (!info.isDirectory()) throw invalid(field, `${given} is not a directory`)
  return { path, dev: String(info.dev), ino: String(info.ino), uid: Number(info.uid), gid: Number(info.gid) }
}

/**
 * The root of the git work tree a task working in `cwd` writes to (index.lock lives there), decided
 * from the folder structure alone: the nearest folder at or above cwd that holds a `.git` folder
 * (lstat: a link named .git does not count). Nothing in a `.git` file (`gitdir:`) or a git folder
 * (`commondir`) is read: the task writes those, and what they name would become writable for the
 * next task in that cwd. A linked worktree or a submodule reaches its git folder only through a
 * path the operator gives (`--writable /repo/.git`, docs/sandbox.md). Nothing when cwd is not inside
 * a work tree, or is its root, or when the root is a folder anyone may write (/var/tmp) or another
 * user's (root's aside): its `.git` is theirs to plant hooks and settings in, which git run by the
 * task would then act on with the rights of the cwd's owner (git-trust.ts).
 */
function gitWorkTreeRoot(cwd: PinnedPath): string | null {
  for (let dir = cwd.path; ; dir = dirname(dir)) {
    const info = lstatSync(`${dir === '/' ? '' : dir}/.git`, { throwIfNoEntry: false })
    if (info?.isDirectory()) {
      const root = statSync(dir, { throwIfNoEntry: false })
      const worldWritable = ((root?.mode ?? 0o002) & 0o002) !== 0
      const othersOwn = root !== undefined && root.uid !== cwd.uid && root.uid !== 0
      return dir !== cwd.path && !worldWritable && !othersOwn ? dir : null
    }
    if (dir === '/') return null
  }
}

/**
 * Whether a user (with no supplementary groups) can reach `path` through its folders' modes: the
 * search bit of owner, group or others on every folder on the way. A folder inside an idmapped
 * root (`seen`: the innermost one counts) is owned by the user when it has the root's owner, and
 * of its group when it has the root's group: that is how the user sees it there.
 */
export function reachableBy(path: string, user: { uid: number; gid: number }, seen: readonly IdmappedRoot[] = []): boolean {
  return blockingFolder(path, user, seen) === null
}

/**
 * Whether a mask on `path` is needed for a task on `user`: always for the daemon's own places; for
 * another uid's, only when its mode lets the user see something of it (list or enter a folder,
 * read or write a file; owners as reachableBy sees them). A mount on another uid's place that is
 * closed to the user anyway is a mount for nothing, and, where bubblewrap mounts the masks by path
 * (no spawner hides them by descriptor), one its owner can make fail: renamed away as the task
 * starts (a tend home flipped in a loop), it is gone when bubblewrap mounts on it.
 */
export function needsMask(path: string, user: { uid: number; gid: number }, seen: readonly IdmappedRoot[] = []): boolean {
  let info
  try {
    info = statSync(path)
  } catch {
    return false
  }
  if (info.uid === process.getuid!()) return true
  const root = innermost(path, seen)
  const owned = root ? info.uid === root.uid : info.uid === user.uid
  const grouped = root ? info.gid === root.gid : info.gid === user.gid
  const shift = owned ? 6 : grouped ? 3 : 0
  // r and x of a folder, r and w of anything else.
  const wanted = info.isDirectory() ? 0o5 : 0o6
  return ((info.mode >> shift) & wanted) !== 0
}

/** The folder on the way to `path` that the user may not enter (see reachableBy), or null. */
function blockingFolder(path: string, user: { uid: number; gid: number }, seen: readonly IdmappedRoot[]): string | null {
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    let info
    try {
      info = statSync(dir)
    } catch {
      return dir
    }
    const root = innermost(dir, seen)
    const owned = root ? info.uid === root.uid : info.uid === user.uid
    const grouped = root ? info.gid === root.gid : info.gid === user.gid
    const bit = owned ? 0o100 : grouped ? 0o010 : 0o001
    if ((info.mode & bit) === 0) return dir
    if (dir === '/') return null
  }
}

function innermost(dir: string, roots: readonly IdmappedRoot[]): IdmappedRoot | null {
  let found: IdmappedRoot | null = null
  for (const root of roots) if (isWithin(dir, root.path) && (!found || root.path.length > found.path.length)) found = root
  return found
}

function invalid(field: string, detail: string): TendError {
  return new TendError('TEND_ERR_VALIDATION', { detail: `body/${field}: ${detail}` })
}
