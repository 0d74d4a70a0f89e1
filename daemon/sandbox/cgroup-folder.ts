import { closeSync, constants, fstatSync, mkdirSync, openSync } from 'node:fs'

// The checks every folder on the way to a daemon's task groups passes, cgroup v1 or v2: whoever can
// write a folder on that way could swap a group for one without limits between its making and its join.

/** A folder the daemon may create: made when it can be, left to the checks below when not. */
export function makeFolder(path: string): void {
  try {
    mkdirSync(path, { mode: 0o755 })
  } catch {
    // exists, or not ours to make: the checks say which
  }
}

/**
 * The folder as the kernel has it, opened without following a symlink: a directory owned by one of
 * `owners`, writable by no group or other user.
 */
export function checkFolder(path: string, owners: readonly number[], uid: number, mountDev?: number): { dev: number } | { problem: string } {
  let fd: number
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW)
  } catch (error) {
    return { problem: `${path} cannot be opened as a folder (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})` }
  }
  try {
    const stat = fstatSync(fd)
    if (!stat.isDirectory()) return { problem: `${path} is not a folder` }
    if (mountDev !== undefined && stat.dev !== mountDev) return { problem: `${path} is not on the cgroup file system mounted above it` }
    if (!owners.includes(stat.uid)) {
      const own = owners.length === 1
      const fix = own ? `chown ${uid} ${path}` : `chown root:root ${path}`
      const owner = own ? `the daemon's uid ${uid}` : `root or the daemon's uid ${uid}`
      return {
        problem:
          `${path} is owned by uid ${stat.uid}, not ${owner}` + `: that user could replace this daemon's task groups with ones without limits; as root, ${fix}`,
      }
    }
    if ((stat.mode & 0o022) !== 0) {
      return {
        problem:
          `${path} is writable by its group or by others (mode ${(stat.mode & 0o7777).toString(8).padStart(4, '0')}` +
          `): they could replace this daemon's task groups with ones without limits; as root, chmod go-w ${path}`,
      }
    }
    return { dev: stat.dev }
  } finally {
    closeSync(fd)
  }
}
