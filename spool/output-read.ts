import { statSync } from 'node:fs'
import { open, stat, type FileHandle } from 'node:fs/promises'
import { basename, dirname } from 'node:path'
import { TendError } from '../protocol/index.js'

/**
 * Size of a task's output.log, 0 when it does not exist. For bookkeeping (cap checks, recovery);
 * a reader uses readableOutputSize, for which a missing log is an error.
 */
export async function outputSize(path: string): Promise<number> {
  try {
    return (await stat(path)).size
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0
    throw error
  }
}

/** The same, without a trip through the thread pool (a stat of a cached inode does not block). */
export function outputSizeSync(path: string): number {
  try {
    return statSync(path).size
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0
    throw error
  }
}

/**
 * Size of output.log for a reader. The file exists from the task's admission on, so a missing one
 * was deleted: TEND_ERR_OUTPUT_MISSING, never an empty output.
 */
export async function readableOutputSize(path: string): Promise<number> {
  try {
    return (await stat(path)).size
  } catch (error) {
    throw asOutputError(path, error)
  }
}

/**
 * Opens output.log for a whole download: the handle, and its size now (what the download sends,
 * however the file grows meanwhile). A missing file is TEND_ERR_OUTPUT_MISSING.
 */
export async function openOutputSnapshot(path: string): Promise<{ handle: FileHandle; size: number }> {
  let handle: FileHandle
  try {
    handle = await open(path, 'r')
  } catch (error) {
    throw asOutputError(path, error)
  }
  try {
    return { handle, size: (await handle.stat()).size }
  } catch (error) {
    await handle.close()
    throw error
  }
}

/**
 * Reads up to maxBytes of output.log from byte offset `from`. Reads never consume: the file is
 * the only state, so any number of readers keep their own cursors. A missing file is
 * TEND_ERR_OUTPUT_MISSING.
 */
export async function readOutputRange(path: string, from: number, maxBytes: number): Promise<Buffer> {
  let handle
  try {
    handle = await open(path, 'r')
  } catch (error) {
    throw asOutputError(path, error)
  }
  try {
    const buffer = Buffer.allocUnsafe(maxBytes)
    let filled = 0
    while (filled < maxBytes) {
      const { bytesRead } = await handle.read(buffer, filled, maxBytes - filled, from + filled)
      if (bytesRead === 0) break
      filled += bytesRead
    }
    return buffer.subarray(0, filled)
  } finally {
    await handle.close()
  }
}

/** A task's output.log that is gone, as the coded error (other failures pass through unchanged). */
function asOutputError(path: string, error: unknown): unknown {
  if ((error as NodeJS.ErrnoException).code !== 'ENOENT') return error
  // The layout is <spool>/<id>/output.log.
  return new TendError('TEND_ERR_OUTPUT_MISSING', { id: basename(dirname(path)), detail: `${path} does not exist (deleted outside tend?)` }, { cause: error })
}

/**
 * How many bytes at the end of `chunk` belong to a UTF-8 character that the chunk cuts in two.
 * A text read stops before them so the next read starts on a character boundary; cursors stay
 * byte offsets either way.
 */
export function incompleteUtf8Tail(chunk: Buffer): number {
  const limit = Math.min(3, chunk.length)
  for (let back = 1; back <= limit; back += 1) {
    const byte = chunk[chunk.length - back]!
    if ((byte & 0xc0) === 0x80) continue
    if (byte < 0x80) return 0
    const expected = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1
    return expected > back ? back : 0
  }
  return 0
}

/** Byte offset where the last `lines` lines of output.log start (a final unterminated line counts). */
export async function tailOffset(path: string, lines: number): Promise<number> {
  const size = await readableOutputSize(path)
  if (lines === 0) return size
  const blockBytes = 64 * 1024
  let end = size
  let newlines = 0
  // A trailing newline ends the last line rather than starting an empty one.
  let skipFinalNewline = true
  while (end > 0) {
    const start = Math.max(0, end - blockBytes)
    const block = await readOutputRange(path, start, end - start)
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
