import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, realpathSync, rmdirSync, statfsSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { checkFolder, makeFolder } from './cgroup-folder.js'

export type CgroupController = 'memory' | 'pids'

/** Where this daemon makes its task groups, per controller (null: not here), and why not. */
export interface CgroupRoots {
  memory: string | null
  pids: string | null
  /** Why a controller has no folder here and what would give it one; null when both have one. */
  problem: string | null
  /** The process-count limit of all the daemon's tasks together (on its pids folder), or null: none. */
  allTasksPidsMax?: number | null
  /** The process-count limit of every daemon's tasks together (the smallest on tend's pids folder and its uid's), or null: none. */
  allDaemonsPidsMax?: number | null
  /** Why every daemon's tasks together are not bounded, and what the operator runs to bound them. */
  allDaemonsProblem?: string
}

export interface CgroupParentOptions {
  /** tend's folder in each controller (setting cgroupName). */
  name: string
  /** The daemon's uid: its own folder is <name>/<uid>. */
  uid: number
  /** This daemon's folder inside its uid's (daemonCgroupFolder of its home): <name>/<uid>/<daemon>. */
  daemon: string
  /** The process-count limit of that folder: every task of the daemon together. Default: none. */
  pidsMax?: number
  /** Where the v1 controllers are mounted. Default /sys/fs/cgroup. */
  cgroupBase?: string
}

const CGROUP_SUPER_MAGIC = 0x27e0eb

/**
 * The folder of one daemon's task groups inside its uid's, named after its home: daemons of one uid
 * (two of them on one machine, each with its own home) each have their own, so that one task id
 * (a task given its id from outside keeps it from attempt to attempt) never names another daemon's
 * group, left or live.
 */
export function daemonCgroupFolder(home: string): string {
  let real: string
  try {
    real = realpathSync.native(home)
  } catch {
    real = resolve(home)
  }
  return `home-${createHash('sha256').update(real).digest('hex').slice(0, 16)}`
}

/**
 * One folder of task groups per daemon uid: <controller mount>/<name>/<uid>, and in it one per
 * daemon (daemonCgroupFolder), where its task groups are. A task group is made,
 * then joined a moment later; whoever can write a folder on its way could swap it in between for
 * one without limits. So every folder from the controller's mount down must be owned by root or by
 * the daemon's uid (the last one by the daemon's uid) and writable by nobody else, checked on a
 * descriptor opened without following a symlink. A root daemon makes <name> and its own folder; an
 * unprivileged daemon's folder is made and given to it by the operator (or by itself, where it
 * owns <name>).
 */
export function findCgroupRoots(options: CgroupParentOptions): CgroupRoots {
  const found = { memory: cgroupParent('memory', options), pids: cgroupParent('pids', options) }
  const problems = [found.memory, found.pids].filter((each): each is { problem: string } => 'problem' in each).map((each) => each.problem)
  const roots: CgroupRoots = {
    memory: 'path' in found.memory ? found.memory.path : null,
    pids: 'path' in found.pids ? found.pids.path : null,
    problem: problems.length > 0 ? [...new Set(problems)].join('; ') : null,
    allTasksPidsMax: 'path' in found.pids ? (options.pidsMax ?? null) : null,
  }
  if (roots.pids === null) return roots
  const together = boundAllDaemons(dirname(roots.pids), options.uid)
  return { ...roots, allDaemonsPidsMax: together.pidsMax, ...(together.problem ? { allDaemonsProblem: together.problem } : {}) }
}

/**
 * Every daemon's folder has its own process limit, half of what the kernel hands out by default;
 * several daemons (each uid's, several of one uid) would still take every pid together. tend's
 * folder and each uid's bound them all: a root daemon, which owns both, sets the host's share on
 * them where nothing is set yet (an operator's number is kept). An unprivileged daemon cannot: the
 * operator made its uid's folder, and the files inside (pids.max) stay root's. Answers the
 * smallest limit above the daemon's folder, or why there is none and what bounds it.
 */
function boundAllDaemons(own: string, uid: number): { pidsMax: number | null; problem?: string } {
  const top = dirname(own)
  const share = defaultDaemonPidsMax()
  const problems: string[] = []
  for (const folder of uid === 0 && share !== undefined ? [top, own] : []) {
    const file = join(folder, 'pids.max')
    try {
      if (readFileSync(file, 'utf8').trim() === 'max') writeFileSync(file, String(share))
    } catch (error) {
      problems.push(`${file} cannot be set (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`)
    }
  }
  const limits = [top, own].map((folder) => readPidsMax(join(folder, 'pids.max'))).filter((limit): limit is number => limit !== null)
  if (limits.length > 0) return { pidsMax: Math.min(...limits) }
  const fix = `as root, echo ${share ?? 'N'} > ${join(top, 'pids.max')} (every daemon's tasks together; half of what the kernel hands out)`
  const why =
    uid !== 0
      ? `${join(own, 'pids.max')} is root's: this daemon cannot bound the tasks of every daemon together`
      : problems.length > 0
        ? problems.join('; ')
        : "the kernel's pid_max cannot be read"
  return { pidsMax: null, problem: `${why}: ${fix}` }
}

/** A pids.max as a number, or null for `max` (or unreadable). */
function readPidsMax(file: string): number | null {
  try {
    const text = readFileSync(file, 'utf8').trim()
    return /^\d+$/.test(text) ? Number(text) : null
  } catch {
    return null
  }
}

type Found = { path: string } | { problem: string }

function cgroupParent(controller: CgroupController, options: CgroupParentOptions): Found {
  const mount = join(options.cgroupBase ?? '/sys/fs/cgroup', controller)
  if (!existsSync(join(mount, 'cgroup.procs'))) return { problem: unmountedHint([controller], options.cgroupBase) }
  try {
    if (statfsSync(mount).type !== CGROUP_SUPER_MAGIC) return { problem: `${mount} is not a cgroup file system` }
  } catch (error) {
    return { problem: `${mount} cannot be read: ${(error as Error).message}` }
  }
  const top = join(mount, options.name)
  const own = join(top, String(options.uid))
  const mountChecked = checkFolder(mount, [0, options.uid], options.uid)
  if ('problem' in mountChecked) return mountChecked
  // Top down: nothing is made inside a folder before it is known that no other uid can write it.
  if (options.uid === 0) makeFolder(top)
  else if (!existsSync(top)) return { problem: `${own} does not exist: as root, ${delegation(own, options.uid)}` }
  const topChecked = checkFolder(top, [0, options.uid], options.uid, mountChecked.dev)
  if ('problem' in topChecked) return topChecked
  makeFolder(own)
  if (!existsSync(own)) return { problem: `${own} does not exist: as root, ${delegation(own, options.uid)}` }
  const ownChecked = checkFolder(own, [options.uid], options.uid, mountChecked.dev)
  if ('problem' in ownChecked) return ownChecked
  const daemon = join(own, options.daemon)
  makeFolder(daemon)
  const daemonChecked = checkFolder(daemon, [options.uid], options.uid, mountChecked.dev)
  if ('problem' in daemonChecked) return existsSync(daemon) ? daemonChecked : { problem: `the daemon cannot create its folder of task groups ${daemon}` }
  // Owned and checked, yet perhaps not usable (a controller that refuses new groups): one probe.
  const probe = join(daemon, `probe-${process.pid}`)
  try {
    mkdirSync(probe)
    rmdirSync(probe)
  } catch (error) {
    return { problem: `the daemon cannot create groups in ${daemon} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})` }
  }
  if (controller === 'pids' && options.pidsMax !== undefined) {
    try {
      writeFileSync(join(daemon, 'pids.max'), String(options.pidsMax))
    } catch (error) {
      return {
        problem: `the daemon cannot limit the processes of all its tasks in ${daemon} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
      }
    }
  }
  return { path: daemon }
}

/**
 * How many processes all of a daemon's tasks may have together by default: half of what the kernel
 * hands out (pid_max, or threads-max when smaller), so that tasks at their own limits never take
 * the pids the host needs.
 */
export function defaultDaemonPidsMax(): number | undefined {
  const read = (name: string) => Number(readFileSync(`/proc/sys/kernel/${name}`, 'utf8'))
  try {
    const ceiling = Math.min(read('pid_max'), read('threads-max'))
    return Number.isSafeInteger(ceiling) && ceiling > 1 ? Math.floor(ceiling / 2) : undefined
  } catch {
    return undefined
  }
}

/** When the daemon stops: its folder of task groups goes too, once no group is left in it. */
export function removeDaemonCgroupFolders(roots: Pick<CgroupRoots, 'memory' | 'pids'> & { unified?: { path: string } | null }): void {
  for (const path of new Set([roots.memory, roots.pids, roots.unified?.path ?? null])) {
    if (path === null) continue
    try {
      rmdirSync(path)
    } catch {
      // a group of a task left running (stop --keep-tasks) is still in it
    }
  }
}

/** What an operator runs to give an unprivileged daemon its own folder of groups. */
function delegation(path: string, uid: number): string {
  return `mkdir -p ${path} && chown ${uid} ${path} && chmod 0755 ${path} (the folder above it owned by root, mode 0755); then restart the daemon`
}

/**
 * Why a controller cannot be used because it is not mounted, and how to mount it (cgroup v1; a
 * machine on the unified hierarchy is told how to get v1 controllers).
 */
export function unmountedHint(lacking: CgroupController[], cgroupBase = '/sys/fs/cgroup'): string {
  const named = lacking.join(' and ')
  const mounts = lacking
    .map((controller) => `mkdir -p ${cgroupBase}/${controller} && mount -t cgroup -o ${controller} cgroup ${cgroupBase}/${controller}`)
    .join('; ')
  const v1 = `the cgroup v1 ${named} controller${lacking.length > 1 ? 's are' : ' is'} not mounted`
  if (existsSync(`${cgroupBase}/cgroup.controllers`)) {
    return (
      `${v1}. This machine runs the unified cgroup v2 hierarchy: give the daemon a delegated v2 subtree, ` +
      '`tend service install` (a systemd unit with Delegate=yes, cgroupRoot "own") or the setting cgroupRoot: a folder delegated ' +
      `to the daemon's uid (docs/sandbox.md); or, as root, mount the v1 controllers: ${mounts}; then restart the daemon`
    )
  }
  return `${v1}: as root, ${mounts}; then restart the daemon (tend stop, then any tend command starts a new one).`
}
