import { closeSync, constants, fstatSync, ftruncateSync, openSync, readSync, renameSync } from 'node:fs'
import { rename } from 'node:fs/promises'
import { createRequire } from 'node:module'

/**
 * The home's own files (daemon.log, daemon.pid, daemon.stderr, spool-reserve, submissions.log) sit
 * in a folder that a task under `off` can write: it runs as the daemon's uid. In their place it can
 * put a FIFO (a plain open for writing blocks until a reader comes, holding the instance lock), a
 * symbolic link (root would write through it), a folder (every open fails, for good), a hard link
 * to another file, or a file another user owns. So such a file is opened here only:
 *   - without following a link (O_NOFOLLOW) and without waiting (O_NONBLOCK: a FIFO with no reader
 *     fails with ENXIO at once, one with a reader opens and is seen as such by fstat);
 *   - then checked on the descriptor: one regular file, with one name, owned by this process's uid.
 * Anything else is moved aside, `<name>.<random>.displaced` (as record-writer.ts does for a task's
 * record), never followed, emptied or removed (it may be someone's), and the file is made anew
 * by an exclusive create. Node adds O_CLOEXEC to every open.
 */
const FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY

/** What an open fails with when something else stands at the path: a link, a folder, a FIFO or socket with no reader, a lease, a race. */
const SOMETHING_ELSE = new Set(['ELOOP', 'EISDIR', 'ENXIO', 'EWOULDBLOCK', 'EAGAIN', 'EEXIST', 'ETXTBSY', 'EOPNOTSUPP'])

/** Tries at a path where something keeps being put back, before giving up. */
const TRIES = 3

export interface HomeFile {
  fd: number
  /** Where what stood at the path was moved, when something did. */
  displaced: string | null
}

/** Moves whatever is at `path` aside, under a name nobody can guess; answers that name (null: nothing was there). */
export function displaceSync(path: string): string | null {
  const aside = `${path}.${randomHex(8)}.displaced`
  try {
    renameSync(path, aside)
    return aside
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw error
  }
}

/**
 * Renames a file's new version (written whole through its own descriptor) over it. A task under
 * `off` can put a folder in the file's place (the rename then fails: EISDIR, or ENOTEMPTY and
 * EEXIST), which would keep every later version from landing: the folder is moved aside, under a
 * name nobody can guess, and the rename is done again.
 */
export function renameIntoPlaceSync(temporary: string, target: string): void {
  try {
    renameSync(temporary, target)
  } catch (error) {
    if (!isFolderInTheWay(error)) throw error
    displaceSync(target)
    renameSync(temporary, target)
  }
}

/** renameIntoPlaceSync, with the renames on the thread pool. */
export async function renameIntoPlace(temporary: string, target: string): Promise<void> {
  await rename(temporary, target).catch(async (error: unknown) => {
    if (!isFolderInTheWay(error)) throw error
    displaceSync(target)
    await rename(temporary, target)
  })
}

function isFolderInTheWay(error: unknown): boolean {
  const { code } = error as NodeJS.ErrnoException
  return code === 'EISDIR' || code === 'ENOTEMPTY' || code === 'EEXIST'
}

/**
 * Opens (creating, mode `mode`) a file of the home's own for writing, as above; `append` adds at its
 * end, `truncate` empties it (only once it is known to be the daemon's own regular file). The
 * caller closes `fd`. Errors other than "something else is there" (EROFS, EACCES, ENOSPC) are thrown.
 */
export function openHomeFileSync(path: string, options: { append?: boolean; truncate?: boolean; mode?: number } = {}): HomeFile {
  let displaced: string | null = null
  for (let tries = 1; ; tries++) {
    // After a displacement only a file this open makes will do.
    const flags = FLAGS | (options.append ? constants.O_APPEND : 0) | (tries > 1 ? constants.O_EXCL : 0)
    let fd: number
    try {
      fd = openSync(path, flags, options.mode ?? 0o600)
    } catch (error) {
      if (!SOMETHING_ELSE.has((error as NodeJS.ErrnoException).code ?? '') || tries === TRIES) throw error
      displaced = displaceSync(path) ?? displaced
      continue
    }
    const info = fstatSync(fd)
    if (info.isFile() && info.nlink === 1 && info.uid === process.getuid?.()) {
      if (options.truncate) ftruncateSync(fd, 0)
      return { fd, displaced }
    }
    closeSync(fd)
    if (tries === TRIES)
      throw Object.assign(new Error(`EFTYPE: ${path} keeps being replaced by something that is not a file of the daemon's own`), { code: 'EFTYPE', path })
    displaced = displaceSync(path) ?? displaced
  }
}

/** Whether an error is the file system refusing writes to the home (read-only, or not ours to write). */
export function isUnwritableHome(error: unknown): boolean {
  const { code } = error as NodeJS.ErrnoException
  return code === 'EROFS' || code === 'EACCES'
}

/** That refusal in words, for TEND_ERR_HOME_UNWRITABLE's detail. */
export function unwritableDetail(error: unknown): string {
  const { code, path } = error as NodeJS.ErrnoException
  const what = code === 'EROFS' ? 'its file system is read-only' : 'permission denied'
  return `${what} (${code}${path ? ` on ${path}` : ''})`
}

/**
 * `bytes` random bytes in hex, from /dev/urandom: the CLI loads this file on every command, and
 * node:crypto would cost each of them milliseconds (client/submission-key.ts). node:crypto only
 * where /dev/urandom cannot be read.
 */
function randomHex(bytes: number): string {
  const buffer = Buffer.alloc(bytes)
  let fd: number | undefined
  try {
    fd = openSync('/dev/urandom', constants.O_RDONLY)
    if (readSync(fd, buffer, 0, bytes, null) === bytes) return buffer.toString('hex')
  } catch {
    // No /dev/urandom: node:crypto below.
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
  const { randomBytes } = createRequire(import.meta.url)('node:crypto') as typeof import('node:crypto')
  return randomBytes(bytes).toString('hex')
}
