import { closeSync, constants, fstatSync, lstatSync, openSync, readFileSync, realpathSync } from 'node:fs'
import { TendError } from '../../protocol/index.js'
import { fileKind } from '../../spool/index.js'

/**
 * A daemon trusts its home and its config.json only when no one but its own uid can change them: a
 * config.json that a task (or another user) could write would choose how every later task runs
 * (`{"sandbox":"off"}`). Checked on kernel facts (lstat, and fstat of the descriptor that is then
 * read), before anything in the home is used; a failure is TEND_ERR_HOME_UNSAFE, naming the path
 * and the command that fixes it.
 */

/** A config file is a few KiB: one past this is not one. */
const MAX_CONFIG_BYTES = 1024 * 1024

/** Why `info` (of `path`) could be changed by someone else than `uid`, with the fix; null when it cannot. */
export function ownershipProblem(path: string, info: { uid: number; mode: number }, uid: number): string | null {
  if (info.uid !== uid)
    return `is owned by uid ${info.uid}, not by the daemon's uid ${uid}: another user could change it (fix: \`chown ${uid} ${path}\`, or use another folder)`
  if ((info.mode & 0o022) !== 0)
    return (
      `is writable by ${(info.mode & 0o002) !== 0 ? 'others' : 'its group'} (mode ${(info.mode & 0o777).toString(8)}` +
      `): another user could change it (fix: \`chmod go-w ${path}\`)`
    )
  return null
}

/** Why `path` is not a folder only `uid` can change, or null (also when it does not exist yet: the daemon makes it). */
export function ownFolderProblem(path: string, uid: number): string | null {
  const info = lstatSync(path, { throwIfNoEntry: false })
  if (!info) return null
  if (info.isSymbolicLink()) return `is a symbolic link: give the folder it leads to (${realOrSelf(path)}) itself`
  if (!info.isDirectory()) return `is ${fileKind(info)}, not a folder`
  return ownershipProblem(path, info, uid)
}

/** Throws TEND_ERR_HOME_UNSAFE unless the home is missing or a folder only `uid` can change. */
export function checkHomeFolder(home: string, uid: number): void {
  const problem = ownFolderProblem(home, uid)
  if (problem) throw new TendError('TEND_ERR_HOME_UNSAFE', { path: home, detail: `the tend home ${problem}` })
}

/**
 * config.json's text, or null when there is none. Opened without following a link or waiting on a
 * FIFO; the descriptor is checked (a regular file, owned by `uid`, writable by no one else) before
 * it is read. Throws TEND_ERR_HOME_UNSAFE otherwise.
 */
export function readOwnConfigFile(path: string, uid: number): string | null {
  const unsafe = (detail: string) => new TendError('TEND_ERR_HOME_UNSAFE', { path, detail: `config.json ${detail}` })
  let fd: number
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return null
    if (code === 'ELOOP') throw unsafe(`is a symbolic link: put the file itself there (\`cp --remove-destination "$(readlink -f ${path})" ${path}\`)`)
    // Another user's file the daemon may not even read: say whose it is, not just EACCES.
    const info = code === 'EACCES' ? lstatSync(path, { throwIfNoEntry: false }) : undefined
    const problem = info && ownershipProblem(path, info, uid)
    if (problem) throw unsafe(problem)
    throw error
  }
  try {
    const info = fstatSync(fd)
    if (!info.isFile()) throw unsafe(`is ${fileKind(info)}, not a regular file`)
    const problem = ownershipProblem(path, info, uid)
    if (problem) throw unsafe(problem)
    if (info.size > MAX_CONFIG_BYTES) throw unsafe(`holds ${info.size} bytes: a configuration is a few KiB`)
    return readFileSync(fd, 'utf8')
  } finally {
    closeSync(fd)
  }
}

function realOrSelf(path: string): string {
  try {
    return realpathSync.native(path)
  } catch {
    return path
  }
}
