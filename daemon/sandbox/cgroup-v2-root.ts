import { closeSync, constants, fstatSync, mkdirSync, openSync, readFileSync, rmdirSync, statfsSync, writeFileSync } from 'node:fs'
import { dirname, isAbsolute, join, relative } from 'node:path'
import { checkFolder, makeFolder } from './cgroup-folder.js'

/** This daemon's folder of cgroup v2 task groups, inside the subtree it was given. */
export interface UnifiedRoot {
  /** The daemon's folder of task groups: <subtree>/<daemon folder>. */
  path: string
  /** The subtree the daemon was given (setting cgroupRoot). */
  subtree: string
  /** The controllers each task group gets (memory, pids, io where the subtree has them). */
  controllers: string[]
  /** Where the subtree came from, in words, for `tend status`. */
  why: string
  /** The process-count limit of all the daemon's tasks together (its folder's pids.max), or null: none. */
  allTasksPidsMax: number | null
}

export type UnifiedFound = { root: UnifiedRoot } | { problem: string }

export interface UnifiedRootOptions {
  /** Setting cgroupRoot: `own` (the daemon's own cgroup, delegated by its service manager) or an absolute folder. */
  setting: string
  /** The daemon's uid. */
  uid: number
  /** This daemon's folder inside the subtree (daemonCgroupFolder of its home). */
  daemon: string
  /** Whether a folder is on a cgroup2 file system. Default: statfs's magic number (tests give fake trees). */
  isCgroup2?: (path: string) => boolean
  /** /proc/self/cgroup's text, for `own`. Default: read. */
  procSelfCgroup?: string
  /** /proc/self/mountinfo's text, for `own`. Default: read. */
  mountInfo?: string
  /** The process-count limit of every task of the daemon together (pids.max of its folder, with the pids controller). Default: none. */
  pidsMax?: number
}

const CGROUP2_SUPER_MAGIC = 0x63677270
/** The controllers task groups get where the subtree has them: the limits (memory, pids) and io.stat (io). */
const WANTED_CONTROLLERS = ['memory', 'pids', 'io'] as const
/** The leaf the daemon moves to inside its own cgroup: a group with controllers enabled for its children holds no process. */
const DAEMON_LEAF = 'daemon'

function isCgroup2FileSystem(path: string): boolean {
  try {
    return statfsSync(path).type === CGROUP2_SUPER_MAGIC
  } catch {
    return false
  }
}

/**
 * The cgroup v2 subtree whoever runs the daemon gave it, checked as v1's folders are
 * (cgroup-parent.ts): every folder from the mount down owned by root or the daemon's uid and
 * writable by no one else, the subtree and the files a delegation hands over (cgroup.procs,
 * cgroup.subtree_control) the daemon's uid's, each checked on a descriptor opened without
 * following a link. The controllers it has are enabled for the daemon's folder and its task groups;
 * which of them it lacks is for the caller to judge (strict needs memory and pids).
 */
export function findUnifiedRoot(options: UnifiedRootOptions): UnifiedFound {
  const isCgroup2 = options.isCgroup2 ?? isCgroup2FileSystem
  let subtree: string
  let why: string
  if (options.setting === 'own') {
    const own = ownCgroup(options, isCgroup2)
    if ('problem' in own) return own
    subtree = own.path
    why = `the daemon's own cgroup ${own.name}, delegated to it`
  } else if (isAbsolute(options.setting)) {
    subtree = options.setting
    why = `the folder the operator delegated (cgroupRoot)`
  } else {
    return { problem: `cgroupRoot ${JSON.stringify(options.setting)} is neither "own" nor an absolute folder` }
  }
  if (!isCgroup2(subtree)) return { problem: `${subtree} is not on a cgroup2 file system` }
  const checked = checkSubtree(subtree, options.uid, isCgroup2)
  if ('problem' in checked) return checked
  const unmoved = options.setting === 'own' ? moveToLeaf(subtree) : null
  if (unmoved) return { problem: unmoved }
  const enableProblem = enableControllers(subtree)
  const path = join(subtree, options.daemon)
  makeFolder(path)
  const daemonChecked = checkFolder(path, [options.uid], options.uid, checked.dev)
  if ('problem' in daemonChecked) return daemonChecked
  const daemonProblem = enableControllers(path)
  const probe = join(path, `probe-${process.pid}`)
  try {
    mkdirSync(probe)
    rmdirSync(probe)
  } catch (error) {
    return { problem: `the daemon cannot create groups in ${path} (${errorCode(error)})` }
  }
  const controllers = readWords(join(path, 'cgroup.subtree_control'))
  let problem = enableProblem ?? daemonProblem
  let allTasksPidsMax: number | null = null
  if (controllers.includes('pids') && options.pidsMax !== undefined) {
    try {
      writeFileSync(join(path, 'pids.max'), String(options.pidsMax))
      allTasksPidsMax = options.pidsMax
    } catch (error) {
      problem = `the daemon cannot limit the processes of all its tasks in ${path} (${errorCode(error)})`
    }
  }
  return { root: { path, subtree, controllers, why: problem ? `${why}; ${problem}` : why, allTasksPidsMax } }
}

/**
 * The daemon's own cgroup (`0::/path` in /proc/self/cgroup) on the cgroup2 mount. Once checked, the
 * daemon and whatever else runs in it (its children, under a unit of its own) move to its leaf
 * `daemon` (moveToLeaf): a group whose children have controllers holds no process itself.
 */
function ownCgroup(options: UnifiedRootOptions, isCgroup2: (path: string) => boolean): { path: string; name: string } | { problem: string } {
  const membership = options.procSelfCgroup ?? readFileSync('/proc/self/cgroup', 'utf8')
  const name = /^0::(\/.*)$/m.exec(membership)?.[1]
  if (name === undefined) return { problem: 'the daemon is in no cgroup v2 group (/proc/self/cgroup has no 0:: line)' }
  if (name === '/') return { problem: "the daemon's own cgroup is the root of the hierarchy: nobody delegated it (run it in a unit with Delegate=yes)" }
  const mount = cgroup2Mount(options.mountInfo ?? readFileSync('/proc/self/mountinfo', 'utf8'))
  if (mount === null) return { problem: 'no cgroup2 file system is mounted with its root visible here' }
  const path = join(mount, name)
  if (!isCgroup2(path)) return { problem: `${path} (the daemon's own cgroup) is not on a cgroup2 file system` }
  return { path, name }
}

/** Moves the daemon, and whatever runs beside it in its own cgroup, to the leaf `daemon`; answers why not, or null. */
function moveToLeaf(own: string): string | null {
  const leaf = join(own, DAEMON_LEAF)
  makeFolder(leaf)
  const moved = moveProcesses(own, leaf)
  return moved ? `the daemon cannot move to the leaf ${leaf} of its own cgroup (${moved}): it is not delegated to it` : null
}

/** Where the cgroup2 file system is mounted with its root (`/`) in view, from /proc/self/mountinfo's text. */
export function cgroup2Mount(mountInfo: string): string | null {
  for (const line of mountInfo.split('\n')) {
    const [before, after] = line.split(' - ')
    if (!before || !after || after.split(' ')[0] !== 'cgroup2') continue
    const fields = before.split(' ')
    if (fields[3] === '/' && fields[4]) return fields[4].replace(/\\(\d{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)))
  }
  return null
}

/** Moves every process of `from` into `to`; answers why it could not, or null. */
function moveProcesses(from: string, to: string): string | null {
  try {
    for (const pid of readWords(join(from, 'cgroup.procs'))) {
      try {
        writeFileSync(join(to, 'cgroup.procs'), pid)
      } catch (error) {
        // ESRCH: it exited meanwhile.
        if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error
      }
    }
    return null
  } catch (error) {
    return errorCode(error)
  }
}

/** The folders from the mount down to the subtree, and the subtree's delegated files, as a delegation leaves them. */
function checkSubtree(subtree: string, uid: number, isCgroup2: (path: string) => boolean): { dev: number } | { problem: string } {
  let mount = subtree
  while (dirname(mount) !== mount && isCgroup2(dirname(mount))) mount = dirname(mount)
  const mountChecked = checkFolder(mount, [0, uid], uid)
  if ('problem' in mountChecked) return mountChecked
  let folder = mount
  const above = checkControlFiles(mount, [0, uid])
  if (above) return { problem: above }
  for (const part of relative(mount, subtree).split('/').filter(Boolean)) {
    folder = join(folder, part)
    const owners = folder === subtree && uid !== 0 ? [uid] : [0, uid]
    const checked = checkFolder(folder, owners, uid, mountChecked.dev)
    if ('problem' in checked) return checked
    const files = checkControlFiles(folder, owners)
    if (files) return { problem: files }
  }
  return mountChecked
}

/**
 * Who may move processes between groups, or take controllers away from them: cgroup v2 lets whoever
 * may write the cgroup.procs (or cgroup.threads) of two groups' common ancestor move any process
 * between them, whatever its uid, and whoever may write a folder's cgroup.subtree_control take its
 * children's controllers (and so their limits). So on every folder from the mount down to the
 * subtree these files are the daemon's uid's or root's, and writable by no one else. Answers why
 * not, or null. cgroup.threads is absent on kernels before 4.14.
 */
function checkControlFiles(folder: string, owners: number[]): string | null {
  for (const file of ['cgroup.procs', 'cgroup.threads', 'cgroup.subtree_control']) {
    const path = join(folder, file)
    const facts = fileFacts(path)
    if (facts === 'ENOENT' && file === 'cgroup.threads') continue
    if (typeof facts === 'string') return `${path} cannot be read (${facts})`
    // Root's cgroup.threads in a folder delegated to a user is not delegation, and no one else's.
    const allowed = file === 'cgroup.threads' ? [...new Set([0, ...owners])] : owners
    if (!allowed.includes(facts.uid)) {
      const daemonUid = owners[owners.length - 1]!
      const owner = daemonUid === 0 ? 'root' : owners.length === 1 ? `the daemon's uid ${daemonUid}` : `root or the daemon's uid ${daemonUid}`
      return (
        `${path} is owned by uid ${facts.uid}, not ${owner}: that user could move this daemon's tasks out of their groups, or take their ` +
        `limits; as root, chown ${daemonUid} ${path}`
      )
    }
    if ((facts.mode & 0o022) !== 0) {
      return `${path} is writable by its group or by others: they could move this daemon's tasks out of their groups; as root, chmod go-w ${path}`
    }
  }
  return null
}

/** Enables the wanted controllers the folder has for its children; answers why some could not be, or null. */
function enableControllers(folder: string): string | null {
  const available = readWords(join(folder, 'cgroup.controllers'))
  const enabled = readWords(join(folder, 'cgroup.subtree_control'))
  const wanted = WANTED_CONTROLLERS.filter((name) => available.includes(name) && !enabled.includes(name))
  if (wanted.length === 0) return null
  try {
    writeFileSync(join(folder, 'cgroup.subtree_control'), wanted.map((name) => `+${name}`).join(' '))
    return null
  } catch (error) {
    const code = errorCode(error)
    const hint = code === 'EBUSY' ? ': processes run in it (a group whose children get controllers holds none)' : ''
    return `${wanted.join(', ')} cannot be enabled in ${join(folder, 'cgroup.subtree_control')} (${code})${hint}`
  }
}

/** A file's owner and mode, read from the file opened without following a link; or why it could not be. */
function fileFacts(path: string): { uid: number; mode: number } | string {
  let fd: number
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch (error) {
    return errorCode(error)
  }
  try {
    const { uid, mode } = fstatSync(fd)
    return { uid, mode }
  } finally {
    closeSync(fd)
  }
}

function readWords(path: string): string[] {
  try {
    // A fake tree (tests) keeps what was written to cgroup.subtree_control: `+memory`.
    return readFileSync(path, 'utf8')
      .split(/\s+/)
      .filter(Boolean)
      .map((word) => word.replace(/^\+/, ''))
  } catch {
    return []
  }
}

function errorCode(error: unknown): string {
  return (error as NodeJS.ErrnoException).code ?? (error as Error).message
}
