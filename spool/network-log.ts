import type { FileHandle } from 'node:fs/promises'
import { NETWORK_LOG_FILE, NETWORK_VIAS, type NetworkDecision } from '../protocol/index.js'
import { spoolFolders, withTaskFolder, type OpenFolder } from './task-folders.js'
import { openRegularFile, openRegularFileForWrite } from './untrusted-file.js'

/**
 * A task's network.log (docs/spool.md): one JSON line per decision of the egress proxy, oldest
 * first, and, once the log reached its cap, a summary line `{"time", "omitted": N}` when the task
 * ends. Written only by the daemon's network ledger; reached through the task's folder held by
 * descriptor (task-folders.ts), never through a path the task could have redirected, and opened
 * as untrusted (untrusted-file.ts): a link, a FIFO or a second name at its place is refused.
 */

/** What one append did with its lines. */
export interface AppendOutcome {
  /** Lines now whole in the file. */
  written: number
  /** Lines left out because the file would have grown past `maxBytes`: every line from the first that did not fit. */
  omitted: number
  /** Lines the file could not take (the disk refused them, the folder or file was not tend's). */
  lost: number
}

/**
 * Appends `lines` (each one JSON text, no newline) to the task's network.log while it stays within
 * `maxBytes` (its size read from the descriptor, not remembered), then `trailer` whatever the
 * cap. A write that fails part-way is cut back to the last whole line, so a later append never
 * glues onto half a line.
 */
export async function appendNetworkLog(
  spoolRoot: string,
  id: string,
  lines: string[],
  options: { maxBytes: number; trailer?: string },
): Promise<AppendOutcome> {
  let folder: OpenFolder | null = null
  let handle: FileHandle | null = null
  const all = lines.length
  try {
    folder = spoolFolders(spoolRoot).open(id)
    handle = await openRegularFileForWrite(folder.file(NETWORK_LOG_FILE), { append: true })
    const start = (await handle.stat()).size
    const parts: Buffer[] = []
    let size = start
    for (const line of lines) {
      const bytes = Buffer.from(`${line}\n`)
      if (size + bytes.length > options.maxBytes) break
      parts.push(bytes)
      size += bytes.length
    }
    const omitted = all - parts.length
    if (options.trailer !== undefined) parts.push(Buffer.from(`${options.trailer}\n`))
    const whole = await writeLines(handle, parts, start)
    const written = Math.min(whole, all - omitted)
    return { written, omitted, lost: all - omitted - written }
  } catch {
    return { written: 0, omitted: 0, lost: all }
  } finally {
    await handle?.close().catch(() => undefined)
    folder?.close()
  }
}

/** Writes the lines one after another; answers how many are whole in the file (a torn one is cut off again). */
async function writeLines(handle: FileHandle, parts: Buffer[], start: number): Promise<number> {
  const data = Buffer.concat(parts)
  let done = 0
  try {
    while (done < data.length) {
      const { bytesWritten } = await handle.write(data, done, data.length - done)
      if (bytesWritten <= 0) break
      done += bytesWritten
    }
  } catch {
    // The disk refused the rest: what is whole stays, the torn line goes below.
  }
  let whole = 0
  let end = 0
  for (const part of parts) {
    if (end + part.length > done) break
    end += part.length
    whole++
  }
  if (end < done || done < data.length) await handle.truncate(start + end).catch(() => undefined)
  return whole
}

/** One read of a task's network.log. */
export interface NetworkLogRead {
  entries: NetworkDecision[]
  /** Byte offset after the last whole line read. */
  next: number
  /** The file's size when it was read (0 when there is none yet). */
  size: number
}

/** Bytes read at once: many lines, and far fewer than the cap. */
const READ_CHUNK_BYTES = 256 * 1024

/**
 * Reads up to `limit` decisions from byte `from` on: whole lines only (a line still being written
 * is left for the next read), the summary lines and any line that is not a decision passed over.
 */
export async function readNetworkLog(spoolRoot: string, id: string, from: number, limit: number): Promise<NetworkLogRead> {
  return withTaskFolder(spoolRoot, id, async (folder) => {
    let opened: Awaited<ReturnType<typeof openRegularFile>>
    try {
      opened = await openRegularFile(folder.file(NETWORK_LOG_FILE))
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { entries: [], next: from, size: 0 }
      throw error
    }
    const { handle, info } = opened
    try {
      const entries: NetworkDecision[] = []
      let next = Math.min(from, info.size)
      while (entries.length < limit && next < info.size) {
        const chunk = Buffer.alloc(Math.min(READ_CHUNK_BYTES, info.size - next))
        const { bytesRead } = await handle.read(chunk, 0, chunk.length, next)
        const lastNewline = chunk.subarray(0, bytesRead).lastIndexOf(0x0a)
        if (lastNewline === -1) break
        let lineStart = 0
        while (lineStart <= lastNewline && entries.length < limit) {
          const lineEnd = chunk.indexOf(0x0a, lineStart)
          const decision = decisionOf(chunk.subarray(lineStart, lineEnd).toString('utf8'))
          if (decision) entries.push(decision)
          lineStart = lineEnd + 1
        }
        next += lineStart
      }
      return { entries, next, size: info.size }
    } finally {
      await handle.close()
    }
  })
}

/** A line as a decision, or null (a summary line, or anything else). */
function decisionOf(line: string): NetworkDecision | null {
  let value: unknown
  try {
    value = JSON.parse(line)
  } catch {
    return null
  }
  const entry = value as Partial<NetworkDecision> | null
  if (typeof entry !== 'object' || entry === null) return null
  const { time, name, port, via, decision, reason, address, error, sentBytes, receivedBytes } = entry
  if (typeof time !== 'string' || typeof name !== 'string' || !Number.isInteger(port) || !NETWORK_VIAS.includes(via as never)) return null
  if (decision !== 'allowed' && decision !== 'blocked') return null
  if (!isCount(sentBytes) || !isCount(receivedBytes)) return null
  const optional = { reason, address, error }
  if (Object.values(optional).some((text) => text !== undefined && typeof text !== 'string')) return null
  return { time, name, port: port!, via: via!, decision, ...dropUndefined(optional), sentBytes, receivedBytes }
}

const isCount = (value: unknown): value is number => Number.isInteger(value) && (value as number) >= 0

function dropUndefined(fields: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(fields).filter((entry): entry is [string, string] => entry[1] !== undefined))
}
