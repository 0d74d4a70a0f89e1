import { cutText, plainText } from '../../../protocol/index.js'
import { PATTERN_LINE_MAX, type LinePattern } from './line-pattern.js'

/** A line that matched, as it was matched, and the byte offset just past it (its newline included). */
export interface LineMatch {
  line: string
  end: number
}

/**
 * Output scanned line by line from a byte offset for the first line a pattern matches (a read's
 * `waitFor`), fed as it grows. A line counts once it is complete (its newline came, or the output
 * ended with it): a line still being written could yet turn out different.
 */
export interface LineScan {
  /** Bytes from the start offset are fed in order; answers the first matching line they complete. */
  feed(bytes: Buffer): LineMatch | null
  /** The output has ended: its last line, without a newline, is complete too. */
  finish(): LineMatch | null
  /** The offset the next fed byte is at. */
  readonly position: number
  /** Bytes of the line being written that are held (at most a pattern's line, in UTF-8, and a character). */
  readonly heldBytes: number
}

/** Most bytes of one line kept to be matched: PATTERN_LINE_MAX characters of up to 4 bytes each. */
const LINE_HEAD_BYTES = PATTERN_LINE_MAX * 4

/**
 * Every line is matched as plain text (control sequences removed, a redrawn line as it was left),
 * a pipe's as a terminal's: that is what the agent tools and `logs --plain` show, so a pattern
 * written from what was read meets the line it was written from.
 */
export function createLineScan(pattern: LinePattern, from: number): LineScan {
  let position = from
  // The head of the line being written; the rest of a longer line is only counted.
  let head: Buffer[] = []
  let headBytes = 0
  const complete = (end: number): LineMatch | null => {
    const line = plainText(Buffer.concat(head, headBytes))
    head = []
    headBytes = 0
    if (!pattern.matches(line)) return null
    return { line: cutText(line, PATTERN_LINE_MAX), end }
  }
  const hold = (bytes: Buffer) => {
    const kept = bytes.subarray(0, Math.max(0, LINE_HEAD_BYTES - headBytes))
    if (kept.length === 0) return
    head.push(kept)
    headBytes += kept.length
  }
  return {
    feed(bytes) {
      let start = 0
      for (;;) {
        const newline = bytes.indexOf(0x0a, start)
        if (newline === -1) break
        hold(bytes.subarray(start, newline))
        const match = complete(position + newline + 1)
        if (match) {
          position += bytes.length
          return match
        }
        start = newline + 1
      }
      hold(bytes.subarray(start))
      position += bytes.length
      return null
    },
    finish() {
      return headBytes > 0 ? complete(position) : null
    },
    get position() {
      return position
    },
    get heldBytes() {
      return headBytes
    },
  }
}
