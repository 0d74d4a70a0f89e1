import { plainTextChunk } from '../../protocol/index.js'

/** Longest redrawn last line kept back before it is printed as it stands. */
const MAX_REDRAWN_LINE_BYTES = 64 * 1024

/**
 * A terminal task's output turned into plain text chunk by chunk, as `tend logs --plain` reads it.
 * Bytes whose text the next chunk can still change stay here, not on stdout: an unfinished control
 * sequence or character, and a last line redrawn with `\r` (a progress bar), printed once it ends
 * so that its states do not run into each other. Kept in memory rather than read again: a read
 * from before them would answer at once, and a follow would spin.
 */
export class PlainTextStream {
  private pending: Buffer = Buffer.alloc(0)

  /** Bytes taken but not printed yet; a reader's place in output.log is this far before its next. */
  get pendingBytes(): number {
    return this.pending.length
  }

  /** The text to print for the next chunk; `final`: the output ends with it. */
  push(bytes: Buffer, final: boolean): string {
    const all = this.pending.length > 0 ? Buffer.concat([this.pending, bytes]) : bytes
    let cut = all.length
    if (!final) {
      const lineStart = all.lastIndexOf(0x0a) + 1
      if (all.indexOf(0x0d, lineStart) !== -1 && all.length - lineStart <= MAX_REDRAWN_LINE_BYTES) cut = lineStart
    }
    const { text, heldBackBytes } = plainTextChunk(all.subarray(0, cut), { final })
    this.pending = Buffer.from(all.subarray(cut - heldBackBytes))
    return text
  }

  /** What is left when reading stops before the output ends: the last line as it stands now. */
  flush(): string {
    const { text, heldBackBytes } = plainTextChunk(this.pending, { final: false })
    this.pending = this.pending.subarray(this.pending.length - heldBackBytes)
    return text
  }
}
