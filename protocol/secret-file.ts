import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs'
import { TendError } from './errors.js'

/** The most a credential file may hold: a URL or a key, not a document. */
const MAX_SECRET_BYTES = 64 * 1024

/**
 * Reads a file that holds a credential (a Redis URL with its password, the cluster key). It is
 * opened without following a symbolic link and without blocking (a FIFO never holds the reader),
 * then judged by what the kernel says of the open file: a regular file, owned by the reading user,
 * with no permission for group or others. Anything else is TEND_ERR_SECRET_FILE, naming why.
 */
export function readSecretFile(path: string, what: string): Buffer {
  const refuse = (detail: string, cause?: unknown): never => {
    throw new TendError('TEND_ERR_SECRET_FILE', { what, path, detail }, cause === undefined ? {} : { cause })
  }
  let fd: number
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    return refuse(code === 'ELOOP' ? 'it is a symbolic link: give the file itself' : (error as Error).message, error)
  }
  try {
    const stat = fstatSync(fd)
    if (!stat.isFile()) refuse('it is not a regular file')
    const uid = process.getuid?.()
    if (uid !== undefined && stat.uid !== uid) refuse(`it belongs to uid ${stat.uid}, not to the user who reads it (uid ${uid})`)
    if ((stat.mode & 0o077) !== 0)
      refuse(`group or others have permissions on it (mode ${(stat.mode & 0o777).toString(8).padStart(4, '0')}): chmod 600 ${path}`)
    if (stat.size > MAX_SECRET_BYTES) refuse(`it holds ${stat.size} bytes; a credential file holds at most ${MAX_SECRET_BYTES}`)
    const buffer = Buffer.alloc(stat.size)
    let filled = 0
    while (filled < buffer.length) {
      const read = readSync(fd, buffer, filled, buffer.length - filled, filled)
      if (read === 0) break
      filled += read
    }
    return buffer.subarray(0, filled)
  } finally {
    closeSync(fd)
  }
}

/** A Redis URL from a credential file: its first line, which must be a redis:// or rediss:// URL. */
export function readRedisUrlFile(path: string): string {
  const url = readSecretFile(path, 'Redis URL file').toString('utf8').split('\n')[0]!.trim()
  if (!/^rediss?:\/\/\S+$/.test(url))
    throw new TendError('TEND_ERR_SECRET_FILE', { what: 'Redis URL file', path, detail: 'its first line is not a redis:// or rediss:// URL' })
  return url
}
