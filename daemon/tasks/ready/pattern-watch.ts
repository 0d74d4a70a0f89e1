import { plainText } from '../../../protocol/index.js'
import type { OutputSource } from '../../../spool/index.js'
import { PATTERN_LINE_MAX, type LinePattern } from '../output/line-pattern.js'

/** How much output one look reads. */
const READ_CHUNK_BYTES = 64 * 1024

/** What a pattern's watch reads, and how it waits for more. */
export interface PatternWatchOptions {
  pattern: LinePattern
  /** The task's output.log now (the held descriptor while the task runs). */
  source: () => OutputSource
  /** Resolves once output.log may have grown past `sizeSeen` (or the wait gave up, or `signal` aborted). */
  waitForChange: (sizeSeen: number) => Promise<unknown>
  signal: AbortSignal
}

/**
 * The first complete line of the task's output (from its first byte) that matches the pattern,
 * as plain text (terminal control sequences removed); null once `signal` aborts. Only new bytes
 * are read after each wake-up; a line longer than PATTERN_LINE_MAX is tried on its beginning.
 */
export async function firstMatchingLine(options: PatternWatchOptions): Promise<string | null> {
  const { pattern, signal } = options
  let offset = 0
  let partial: Buffer = Buffer.alloc(0)
  while (!signal.aborted) {
    const source = options.source()
    const size = await source.size().catch(() => offset)
    if (size <= offset) {
      await options.waitForChange(offset)
      continue
    }
    const chunk = await source.read(offset, Math.min(READ_CHUNK_BYTES, size - offset)).catch(() => Buffer.alloc(0))
    if (chunk.length === 0) {
      await options.waitForChange(offset)
      continue
    }
    offset += chunk.length
    let start = 0
    for (let end = chunk.indexOf(10); end !== -1; end = chunk.indexOf(10, start)) {
      const line = lineText(Buffer.concat([partial, chunk.subarray(start, end)]))
      partial = Buffer.alloc(0)
      start = end + 1
      if (pattern.matches(line)) return line
    }
    // An unfinished line is kept up to what a pattern is tried on.
    if (partial.length < PATTERN_LINE_MAX) partial = Buffer.concat([partial, chunk.subarray(start, start + PATTERN_LINE_MAX - partial.length)])
  }
  return null
}

function lineText(bytes: Buffer): string {
  return plainText(bytes.subarray(0, PATTERN_LINE_MAX))
}
