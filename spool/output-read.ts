import { fstatSync, lstatSync, type Stats } from 'node:fs'
import { lstat, type FileHandle } from 'node:fs/promises'
import { basename, dirname } from 'node:path'
import { TendError } from '../protocol/index.js'
import { OUTPUT_FILE } from './layout.js'
import { spoolFolders, type OpenFolder } from './task-folders.js'
import { fileKind, openRegularFile, openRegularFileToUpdate, untrustedProblem } from './untrusted-file.js'

/** Text reads stop before a character cut in two (protocol/utf8-tail.ts). */
export { incompleteUtf8Tail } from '../protocol/index.js'

/*
 * output.log is the task's own file: under `off` it can replace it (a FIFO, a link, a socket), and
 * under any profile it can take a lease on it through its stdout. Sizes are read with lstat (which
 * neither follows a link nor waits on a lease), and every open is non-blocking and refuses
 * anything but a regular file (untrusted-file.ts).
 */

/**
 * Size of a task's output.log, 0 when it does not exist or is not a regular file. For bookkeeping
 * (cap checks, recovery); a reader uses readableOutputSize, for which a missing log is an error.
 */
export async function outputSize(path: string): Promise<number> {
  return sizeOf(await lstat(path).catch(missingAsNull))
}

/** The same, without a trip through the thread pool (a stat of a cached inode does not block). */
export function outputSizeSync(path: string): number {
  return sizeOf(lstatOrNull(path))
}

/**
 * Bytes output.log takes on disk: its allocated blocks (st_blocks, in 512-byte units), not its
 * logical size, which a task can make anything by truncating its own stdout (a sparse file).
 * 0 when missing or not a regular file.
 */
export function outputAllocatedBytesSync(path: string): number {
  // Any failure (a folder it may not read, an entry that is a file) counts nothing.
  try {
    const info = lstatSync(path, { throwIfNoEntry: false })
    return info?.isFile() ? info.blocks * 512 : 0
  } catch {
    return 0
  }
}

/** output.log's logical size and the bytes it takes on disk (0 and 0 when missing or not a regular file). */
export async function outputFootprint(path: string): Promise<{ size: number; allocatedBytes: number }> {
  return footprintOf(await lstat(path).catch(missingAsNull))
}

/** The same, without a trip through the thread pool (a stat of a cached inode does not block). */
export function outputFootprintSync(path: string): { size: number; allocatedBytes: number } {
  return footprintOf(lstatOrNull(path))
}

function footprintOf(info: { isFile(): boolean; size: number; blocks: number } | null): { size: number; allocatedBytes: number } {
  return info?.isFile() ? { size: info.size, allocatedBytes: info.blocks * 512 } : { size: 0, allocatedBytes: 0 }
}

/**
 * Size of output.log for a reader. The file exists from the task's admission on, so a missing one
 * was deleted, and one that is no regular file was replaced: TEND_ERR_OUTPUT_MISSING, never an
 * empty output.
 */
export async function readableOutputSize(path: string, id?: string): Promise<number> {
  let info: Stats
  try {
    info = await lstat(path)
  } catch (error) {
    throw asOutputError(path, error, id)
  }
  if (!info.isFile()) throw replaced(path, fileKind(info), undefined, id)
  return info.size
}

/**
 * Opens output.log for a whole download: the handle, and its size now (what the download sends,
 * however the file grows meanwhile). A missing file is TEND_ERR_OUTPUT_MISSING.
 */
export async function openOutputSnapshot(path: string, id?: string): Promise<{ handle: FileHandle; size: number }> {
  try {
    const { handle, info } = await openRegularFile(path)
    return { handle, size: info.size }
  } catch (error) {
    throw asOutputError(path, error, id)
  }
}

/**
 * Reads up to maxBytes of output.log from byte offset `from`. Reads never consume: the file is
 * the only state, so any number of readers keep their own cursors. A missing file is
 * TEND_ERR_OUTPUT_MISSING; one under a lease, TEND_ERR_OUTPUT_BUSY at once.
 */
export async function readOutputRange(path: string, from: number, maxBytes: number, id?: string): Promise<Buffer> {
  let handle
  try {
    ;({ handle } = await openRegularFile(path))
  } catch (error) {
    throw asOutputError(path, error, id)
  }
  try {
    return await readHandleRange(handle, from, maxBytes)
  } finally {
    await handle.close()
  }
}

/** Up to maxBytes of an open file from byte offset `from` (fewer at its end). */
export async function readHandleRange(handle: FileHandle, from: number, maxBytes: number): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(maxBytes)
  let filled = 0
  while (filled < maxBytes) {
    const { bytesRead } = await handle.read(buffer, filled, maxBytes - filled, from + filled)
    if (bytesRead === 0) break
    filled += bytesRead
  }
  return buffer.subarray(0, filled)
}

/** Where a reader takes a task's output from: its size now, and bytes of it. */
export interface OutputSource {
  size(): Promise<number>
  read(from: number, maxBytes: number): Promise<Buffer>
}

/** output.log by its path, opened for each look with every check (a finished task's, or one no daemon holds). */
export function outputAtPath(path: string): OutputSource {
  return { size: () => readableOutputSize(path), read: (from, maxBytes) => readOutputRange(path, from, maxBytes) }
}

/**
 * A task's output.log in its folder, reached by the spool's and the folder's descriptors for each
 * look (task-folders.ts): a folder the task replaced (a link to another task's folder) is
 * TEND_ERR_OUTPUT_MISSING, never read through.
 */
export function taskOutput(spoolRoot: string, id: string): OutputSource {
  return {
    size: () => inTaskFolder(spoolRoot, id, (path) => readableOutputSize(path, id)),
    read: (from, maxBytes) => inTaskFolder(spoolRoot, id, (path) => readOutputRange(path, from, maxBytes, id)),
  }
}

/** openOutputSnapshot of a task's output.log, reached as taskOutput reaches it. */
export function openTaskOutputSnapshot(spoolRoot: string, id: string): Promise<{ handle: FileHandle; size: number }> {
  return inTaskFolder(spoolRoot, id, (path) => openOutputSnapshot(path, id))
}

async function inTaskFolder<T>(spoolRoot: string, id: string, look: (path: string) => Promise<T>): Promise<T> {
  let folder: OpenFolder
  try {
    folder = spoolFolders(spoolRoot).open(id)
  } catch (error) {
    const { code } = error as NodeJS.ErrnoException
    const detail =
      code === 'ENOENT'
        ? 'its spool folder does not exist (deleted outside tend?)'
        : code === 'ELOOP'
          ? 'its spool folder was replaced by a symbolic link: it is not followed'
          : code === 'ENOTDIR'
            ? 'its spool folder was replaced by a file'
            : (error as Error).message
    throw new TendError('TEND_ERR_OUTPUT_MISSING', { id, detail }, { cause: error })
  }
  try {
    return await look(folder.file(OUTPUT_FILE))
  } finally {
    folder.close()
  }
}

/**
 * output.log through the descriptor the daemon holds while its task runs: the very file the
 * task's keeper writes, whatever the task has put at its name since (nothing is opened).
 */
export function outputByDescriptor(handle: FileHandle): OutputSource {
  return { size: async () => (await handle.stat()).size, read: (from, maxBytes) => readHandleRange(handle, from, maxBytes) }
}

/**
 * output.log opened for the daemon to hold while its task runs, before the task starts (so it is
 * the file the keeper opens): read through it, measured through it (the cap counts what the keeper
 * writes, even after the task has put another file at its name), and cut back through it.
 */
export async function openOutputToHold(path: string): Promise<FileHandle> {
  try {
    return await openRegularFileToUpdate(path)
  } catch (error) {
    throw asOutputError(path, error)
  }
}

/** The logical size and disk use of an open output.log. */
export async function heldFootprint(handle: FileHandle): Promise<{ size: number; allocatedBytes: number }> {
  return footprintOf(await handle.stat())
}

/**
 * heldFootprint, on the daemon's thread: at a task's end one fstat costs less than the thread
 * pool's round trip (measured: the spawn rate).
 */
export function heldFootprintSync(handle: FileHandle): { size: number; allocatedBytes: number } {
  return footprintOf(fstatSync(handle.fd))
}

/** A task's output.log that is gone, replaced or leased, as the coded error (other failures pass through unchanged). */
function asOutputError(path: string, error: unknown, taskId?: string): unknown {
  // The layout is <spool>/<id>/output.log.
  const id = taskId ?? basename(dirname(path))
  const { code } = error as NodeJS.ErrnoException
  if (code === 'ENOENT') return new TendError('TEND_ERR_OUTPUT_MISSING', { id, detail: `${path} does not exist (deleted outside tend?)` }, { cause: error })
  if (code === 'EWOULDBLOCK' || code === 'EAGAIN') {
    return new TendError(
      'TEND_ERR_OUTPUT_BUSY',
      {
        id,
        detail:
          `a process holds a lease on ${path}` +
          ` (the task itself, through its stdout): reading it would wait until the lease is broken, up to /proc/sys/fs/lease-break-time`,
      },
      { cause: error },
    )
  }
  const problem = untrustedProblem(error)
  if (problem !== null) return replaced(path, problem, error, id)
  // The kernel opens no socket (ENXIO), and some devices not at all: say what is there.
  const info = lstatOrNull(path)
  if (info && !info.isFile()) return replaced(path, fileKind(info), error, id)
  return error
}

function replaced(path: string, kind: string, cause?: unknown, id?: string): TendError {
  return new TendError(
    'TEND_ERR_OUTPUT_MISSING',
    {
      id: id ?? basename(dirname(path)),
      detail: `${path} is ${kind}, not the task's output file (replaced outside tend, or by the task itself?): it is not read`,
    },
    cause === undefined ? {} : { cause },
  )
}

function sizeOf(info: Stats | null): number {
  return info?.isFile() ? info.size : 0
}

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path)
  } catch (error) {
    return missingAsNull(error)
  }
}

function missingAsNull(error: unknown): null {
  if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
  throw error
}

/** Byte offset where the last `lines` lines of output.log start (a final unterminated line counts). */
export async function tailOffset(source: OutputSource, lines: number): Promise<number> {
  const size = await source.size()
  if (lines === 0) return size
  const blockBytes = 64 * 1024
  let end = size
  let newlines = 0
  // A trailing newline ends the last line rather than starting an empty one.
  let skipFinalNewline = true
  while (end > 0) {
    const start = Math.max(0, end - blockBytes)
    const block = await source.read(start, end - start)
    for (let index = block.length - 1; index >= 0; index -= 1) {
      if (block[index] !== 0x0a) {
        skipFinalNewline = false
        continue
      }
      if (skipFinalNewline && start + index === size - 1) {
        skipFinalNewline = false
        continue
      }
      newlines += 1
      if (newlines === lines) return start + index + 1
    }
    end = start
  }
  return 0
}
