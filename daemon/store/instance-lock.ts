import { spawnSync } from 'node:child_process'
import { closeSync, constants, fstatSync, openSync } from 'node:fs'
import { describeHolder, holderProcess, lockHolder, TendError } from '../../protocol/index.js'
import { displaceSync } from '../../protocol/home-file.js'
import { loadAddon } from '../native/load-addon.js'

interface FlockAddon {
  lockExclusive(fd: number): boolean
}

/**
 * One daemon per TEND_HOME: an exclusive flock on the lock file in the home, held by an open
 * descriptor for the daemon's whole life. The kernel frees it the moment that descriptor closes,
 * however the daemon ends, so a crash leaves no stale lock. It belongs to the file, not to a name:
 * a daemon started on another path to the same folder (a bind mount, a symbolic link) meets the
 * same lock. And only who can open the file can take it: the home is its owner's (0700), the file
 * 0600. The descriptor is close-on-exec: no task or keeper inherits the lock.
 */
export function acquireInstanceLock(lockPath: string): { release: () => void; dev: number; ino: number } | null {
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
    return acquireInstanceLock(lockPath)
  }
  // The held file's identity: the daemon's home is where this file is (a home moved aside takes it along).
  return { release: () => closeSync(fd), dev: info.dev, ino: info.ino }
}

/** The live process holding the lock, as the kernel reports it: its pid, and its command unless it is a tend daemon ("unknown" if it cannot be seen). */
export function instanceLockHolder(lockPath: string): string {
  const pid = lockHolder(lockPath)
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
  const child = spawnSync('flock', ['--nonblock', '--exclusive', '--conflict-exit-code', '75', '3'], { stdio: ['ignore', 'ignore', 'pipe', fd] })
  if (child.status === 0) return true
  if (child.status === 75) return false
  throw new TendError('TEND_ERR_DAEMON_START_FAILED', {
    detail:
      `the instance lock could not be taken: the instance-lock addon is missing and flock(1) ` +
      `${child.error ? `could not run (${child.error.message}): install util-linux` : `failed: ${String(child.stderr).trim()}`}`,
  })
}
