import { closeSync, constants, fstatSync, ftruncateSync, openSync, readSync, writeSync, type Stats } from 'node:fs'
import { open, unlink, type FileHandle } from 'node:fs/promises'

/**
 * Opening a file whose path a task could have made: in its spool folder under `off`, in its cwd,
 * in a registry or home another process of the same user can write. Such a path may hold a
 * symbolic link (to anything the daemon may read or write), a FIFO (an open blocks until a writer
 * comes, holding a thread, or the daemon's only one), a device, or a regular file under a lease
 * (an open for reading waits out the lease-break time, 45 s). So every open here:
 *   - never follows a symbolic link in the last component (O_NOFOLLOW: ELOOP);
 *   - never waits (O_NONBLOCK): a FIFO opens at once, and a lease makes the open fail with
 *     EWOULDBLOCK at once instead of waiting for the holder;
 *   - never makes a terminal the daemon's controlling terminal (O_NOCTTY);
 *   - is checked with fstat on the descriptor before a byte is read or written: anything but a
 *     regular file is closed again and refused (EFTYPE), never read; so is a regular file with
 *     more than one name (a hard link the task made to a file it should not reach through tend:
 *     the daemon may be root, and a file of the daemon's on the same disk can be linked in).
 * Node adds O_CLOEXEC to every open.
 */
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY
const WRITE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY

/** The code of the error for a path that is there but is not a regular file. */
export const NOT_REGULAR_FILE = 'EFTYPE'

/** A FIFO, a socket, a device, a folder: what a path is instead of a regular file, for messages. */
export function fileKind(info: Pick<Stats, 'isFile' | 'isDirectory' | 'isSymbolicLink' | 'isFIFO' | 'isSocket'>): string {
  if (info.isFile()) return 'a regular file'
  if (info.isDirectory()) return 'a folder'
  if (info.isSymbolicLink()) return 'a symbolic link'
  if (info.isFIFO()) return 'a FIFO'
  if (info.isSocket()) return 'a socket'
  return 'a device'
}

/**
 * What a failed open of an untrusted path was about, in words: `a symbolic link` (ELOOP), `a FIFO`,
 * `a socket`, `a device`, `a folder` (EFTYPE), `under a lease` (EWOULDBLOCK); null for anything else.
 */
export function untrustedProblem(error: unknown): string | null {
  const { code } = error as NodeJS.ErrnoException
  if (code === NOT_REGULAR_FILE) return (error as { kind?: string }).kind ?? 'not a regular file'
  if (code === 'ELOOP') return 'a symbolic link'
  if (code === 'EWOULDBLOCK' || code === 'EAGAIN') return 'under a lease (held open by another process that will not let go yet)'
  return null
}

function notRegular(path: string, info: Stats): NodeJS.ErrnoException {
  const kind = fileKind(info)
  return Object.assign(new Error(`${NOT_REGULAR_FILE}: ${path} is ${kind}, not a regular file`), { code: NOT_REGULAR_FILE, path, kind })
}

/** How a file only read may be: `secondNames` lets it have other names (see refusal). */
export interface ReadOptions {
  secondNames?: boolean
}

/**
 * What a file a descriptor was opened on must be: one regular file, with no other name (a hard
 * link would reach a file of someone else's). `secondNames`: a file that is only read and that only
 * tend writes, through a fresh name each time (task.json, tend's own files of the home), may have
 * more names: a hard-link backup of the home (`cp -al`, rsnapshot, `rsync --link-dest`) gives
 * every file one, and a task that plants one there can write the file itself anyway.
 */
function refusal(path: string, info: Stats, secondNames: boolean): NodeJS.ErrnoException | null {
  if (!info.isFile()) return notRegular(path, info)
  if (!secondNames && info.nlink > 1) {
    const kind = `a hard link (a file with ${info.nlink} names)`
    return Object.assign(new Error(`${NOT_REGULAR_FILE}: ${path} is ${kind}, not a file of its own`), { code: NOT_REGULAR_FILE, path, kind })
  }
  return null
}

/** Opens a regular file for reading, never waiting and never following a link; its handle and its stat. */
export async function openRegularFile(path: string, options: ReadOptions = {}): Promise<{ handle: FileHandle; info: Stats }> {
  return checked(path, await open(path, READ_FLAGS), options.secondNames)
}

/**
 * Opens (creating, mode `mode`) a regular file for writing the same way; `append` adds at its end,
 * else it is emptied first (after the type check: a FIFO or device is never truncated). `fresh`:
 * a temporary name, made anew by this open whatever was there (see openFreshFile).
 */
export async function openRegularFileForWrite(path: string, options: { mode?: number; append?: boolean; fresh?: boolean } = {}): Promise<FileHandle> {
  if (options.fresh) return openFreshFile(path, options.mode ?? 0o600)
  const { handle } = await checked(path, await open(path, WRITE_FLAGS | (options.append ? constants.O_APPEND : 0), options.mode ?? 0o600))
  if (!options.append) {
    try {
      await handle.truncate(0)
    } catch (error) {
      await handle.close()
      throw error
    }
  }
  return handle
}

/** Tries at a name that a task keeps planting things at, before the write is given up. */
const FRESH_TRIES = 3

/**
 * A new, empty file made at `path` by this very open (O_EXCL), for a temporary name a task can
 * guess: whatever it planted there (a hard link to a file of the daemon's, which an open without
 * O_EXCL would empty and write) is unlinked first, never written through.
 */
async function openFreshFile(path: string, mode: number): Promise<FileHandle> {
  for (let tries = 1; ; tries++) {
    await unlink(path).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error
    })
    try {
      return (await checked(path, await open(path, WRITE_FLAGS | constants.O_EXCL, mode))).handle
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || tries === FRESH_TRIES) throw error
    }
  }
}

async function checked(path: string, handle: FileHandle, secondNames = false): Promise<{ handle: FileHandle; info: Stats }> {
  try {
    const info = await handle.stat()
    const refused = refusal(path, info, secondNames)
    if (refused) throw refused
    return { handle, info }
  } catch (error) {
    await handle.close()
    throw error
  }
}

/** The whole file, at most maxBytes of it (EFBIG past that: it is not what the caller expects). */
export async function readRegularFile(path: string, maxBytes: number, options: ReadOptions = {}): Promise<Buffer> {
  const { handle, info } = await openRegularFile(path, options)
  try {
    if (info.size > maxBytes) throw tooLarge(path, info.size, maxBytes)
    return await handle.readFile()
  } finally {
    await handle.close()
  }
}

/** readRegularFile without the thread pool: for start-up and recovery, and per-task checks of tiny files. */
export function readRegularFileSync(path: string, maxBytes: number, options: ReadOptions = {}): Buffer {
  const fd = openSync(path, READ_FLAGS)
  try {
    const info = fstatSync(fd)
    const refused = refusal(path, info, options.secondNames ?? false)
    if (refused) throw refused
    if (info.size > maxBytes) throw tooLarge(path, info.size, maxBytes)
    // One byte more than allowed tells a file that grew since the stat.
    const buffer = Buffer.allocUnsafe(Math.min(maxBytes + 1, Math.max(info.size + 1, 4096)))
    let filled = 0
    for (;;) {
      const read = readSync(fd, buffer, filled, buffer.length - filled, filled)
      if (read === 0) break
      filled += read
      if (filled > maxBytes) throw tooLarge(path, filled, maxBytes)
      if (filled === buffer.length) break
    }
    return buffer.subarray(0, filled)
  } finally {
    closeSync(fd)
  }
}

/** Writes `data` as the whole content of a regular file (made with `mode` if missing), synchronously. */
export function writeRegularFileSync(path: string, data: string | Buffer, mode = 0o600): void {
  const fd = openSync(path, WRITE_FLAGS, mode)
  try {
    const info = fstatSync(fd)
    const refused = refusal(path, info, false)
    if (refused) throw refused
    ftruncateSync(fd, 0)
    const bytes = typeof data === 'string' ? Buffer.from(data) : data
    for (let offset = 0; offset < bytes.length; ) offset += writeSync(fd, bytes, offset, bytes.length - offset, offset)
  } finally {
    closeSync(fd)
  }
}

function tooLarge(path: string, size: number, maxBytes: number): NodeJS.ErrnoException {
  return Object.assign(new Error(`EFBIG: ${path} holds ${size} bytes, more than the ${maxBytes} expected`), { code: 'EFBIG', path, size, maxBytes })
}

/** Opens an existing regular file for reading and writing (no create, no truncation), the same way. */
export async function openRegularFileToUpdate(path: string): Promise<FileHandle> {
  return (await checked(path, await open(path, constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY))).handle
}

/** Cuts a regular file to `bytes`, through a descriptor opened as above (no link followed, no lease waited on). */
export async function truncateRegularFile(path: string, bytes: number): Promise<void> {
  const { handle } = await checked(path, await open(path, constants.O_WRONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY))
  try {
    await handle.truncate(bytes)
  } finally {
    await handle.close()
  }
}
