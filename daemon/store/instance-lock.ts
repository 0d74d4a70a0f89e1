import { spawnSync } from 'node:child_process'
import { closeSync, constants, fstatSync, openSync, realpathSync } from 'node:fs'
import { dirname } from 'node:path'
import { describeHolder, holderProcess, homeLockHolder, lockHolder, TendError } from '../../protocol/index.js'
import { displaceSync } from '../../protocol/home-file.js'
import { loadAddon } from '../native/load-addon.js'
import { daemonProgram } from '../daemon-programs.js'

interface FlockAddon {
  lockExclusive(fd: number): boolean
}

/** A home's instance lock as a daemon holds it: the folder's flock, and the lock file's. */
export interface InstanceLock {
  release: () => void
  /** The lock file held now (its dev, ino). */
  dev: number
  ino: number
  /** The home folder held locked. */
  home: { dev: number; ino: number }
  /** Locks the file at the lock's name again (made anew if a process removed it): its identity, or null when another process holds it. */
  retakeFile: () => { dev: number; ino: number } | null
}

/**
 * One daemon per TEND_HOME: an exclusive flock on the home folder, one on its spool folder, then
 * one on the lock file in it, each held by an open descriptor for the daemon's whole life. The kernel frees them the
 * moment those descriptors close, however the daemon ends, so a crash leaves no stale lock. They
 * belong to the inodes, not to names: a daemon started on another path to the same folder (a bind
 * mount, a symbolic link) meets the same locks. The folder's comes first because no process can
 * take it away (a process of the daemon's uid can remove the lock file, and a daemon that then
 * made a new one would start beside this one); the file's is what daemons of earlier versions
 * take. Only who can open them can take them: the home is its owner's (0700), the file 0600. The
 * descriptors are close-on-exec: no task or keeper inherits a lock.
 */
export function acquireInstanceLock(lockPath: string, spoolPath: string): InstanceLock | null {
  const held: number[] = []
  const releaseHeld = () => {
    for (const fd of held.splice(0)) closeSync(fd)
  }
  let first: ReturnType<typeof lockFile>
  let home: { dev: number; ino: number }
  try {
    // The home folder, then the spool folder (followed: an operator may link it to another disk),
    // each by its inode: a spool moved or linked into another home is still this daemon's.
    for (const folder of [dirname(lockPath), spoolPath]) {
      const fd = openSync(folder, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOCTTY)
      held.push(fd)
      if (!lockExclusive(fd)) {
        releaseHeld()
        return null
      }
    }
    const homeInfo = fstatSync(held[0]!)
    home = { dev: homeInfo.dev, ino: homeInfo.ino }
    first = lockFile(lockPath)
  } catch (error) {
    releaseHeld()
    throw error
  }
  if (!first) {
    releaseHeld()
    return null
  }
  let file = first
  return {
    release: () => {
      file.release()
      releaseHeld()
    },
    get dev() {
      return file.dev
    },
    get ino() {
      return file.ino
    },
    home,
    retakeFile: () => {
      const next = lockFile(lockPath)
      if (!next) return null
      file.release()
      file = next
      return { dev: next.dev, ino: next.ino }
    },
  }
}

/** The exclusive flock on the lock file (null: another process holds it). */
function lockFile(lockPath: string): { release: () => void; dev: number; ino: number } | null {
  const fd = openLockFile(lockPath)
  let locked: boolean
  try {
    locked = lockExclusive(fd)
  } catch (error) {
    closeSync(fd)
    throw error
  }
  if (!locked) {
    closeSync(fd)
    return null
  }
  const info = fstatSync(fd)
  // Held: a lock file with a wrong owner or a second name (a link made from or to another home's)
  // is set aside, and this home's lock taken anew on a file of its own.
  if (info.uid !== process.getuid!() || info.nlink !== 1) {
    displace(lockPath)
    closeSync(fd)
    return lockFile(lockPath)
  }
  return { release: () => closeSync(fd), dev: info.dev, ino: info.ino }
}

/** The live process holding the lock, as the kernel reports it: its pid, and its command unless it is a tend daemon ("unknown" if it cannot be seen). */
export function instanceLockHolder(lockPath: string, spoolPath: string): string {
  const pid = homeLockHolder(dirname(lockPath), lockPath) ?? lockHolder(realSpool(spoolPath))
  return describeHolder(pid === null ? null : holderProcess(pid), pid)
}

/**
 * Opens (creating, 0600) the lock file without following a link or waiting on a FIFO; anything
 * but a regular file at its name (a folder, a FIFO, a link, a device a task put there) is moved
 * aside, never locked, never a reason not to start.
 */
function openLockFile(lockPath: string): number {
  const flags = constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY
  for (let tries = 1; ; tries++) {
    let fd: number | undefined
    try {
      fd = openSync(lockPath, flags, 0o600)
      if (fstatSync(fd).isFile()) return fd
      closeSync(fd)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code !== 'ELOOP' && code !== 'EISDIR' && code !== 'ENXIO' && code !== 'EWOULDBLOCK' && code !== 'EAGAIN') throw error
    }
    if (tries === 3)
      throw new TendError('TEND_ERR_HOME_UNSAFE', { path: lockPath, detail: 'its lock file keeps being replaced by something else than a regular file' })
    displace(lockPath)
  }
}

function displace(path: string): void {
  displaceSync(path)
}

let addon: FlockAddon | null | undefined

/**
 * flock(LOCK_EX | LOCK_NB) on fd: through the addon, else through util-linux's flock(1) given the
 * descriptor (a flock belongs to the open file description, which the child shares: the lock
 * stays with the daemon's descriptor when the child exits).
 */
function lockExclusive(fd: number): boolean {
  addon ??= loadAddon<FlockAddon>('instanceLock', 'instance-lock', ['lockExclusive']).addon
  if (addon) return addon.lockExclusive(fd)
  const flock = daemonProgram('flock')
  if (flock === null)
    throw new TendError('TEND_ERR_DAEMON_START_FAILED', {
      detail:
        'the instance lock could not be taken: the instance-lock addon is missing and flock(1) was not found on PATH ' +
        '(in a folder only root or this uid can change): install util-linux',
    })
  const child = spawnSync(flock, ['--nonblock', '--exclusive', '--conflict-exit-code', '75', '3'], { stdio: ['ignore', 'ignore', 'pipe', fd] })
  if (child.status === 0) return true
  if (child.status === 75) return false
  throw new TendError('TEND_ERR_DAEMON_START_FAILED', {
    detail:
      `the instance lock could not be taken: the instance-lock addon is missing and flock(1) ` +
      `${child.error ? `could not run (${child.error.message}): install util-linux` : `failed: ${String(child.stderr).trim()}`}`,
  })
}

/** The spool folder's real path (it may be a link to another disk, or to another home's spool). */
function realSpool(spoolPath: string): string {
  try {
    return realpathSync(spoolPath)
  } catch {
    return spoolPath
  }
}
