/**
 * Plain text from what a terminal showed (the output.log of a task started with `tty`), for
 * reading — not a terminal emulator. Control sequences are removed (CSI: colours, cursor moves,
 * erases; OSC: titles, hyperlinks; DCS, SOS, PM and APC strings; the short escapes such as
 * `ESC 7` and `ESC ( B`), `\r\n` becomes `\n`, a line drawn over after a lone `\r` shows what a
 * terminal would (the new characters over the old, the rest of the old line after them; a line
 * erased after its `\r` with `ESC [K` is replaced: a progress bar shows its last state), a
 * backspace moves back over the line as a terminal's does (the echo of an erase, `\b \b`, leaves
 * nothing: spaces drawn over a line's end are not kept), and every other control
 * character but `\n` and `\t` is dropped. A string sequence (OSC, DCS, SOS, PM, APC) ends at the
 * end of its line at the latest: a stray `ESC X` in a pipe's output, or one a hostile command
 * planted, never hides the lines after it from a reader.
 *
 * Node's `util.stripVTControlCharacters` is not used: its pattern ends an OSC at the first space
 * or `@`, so the title bash sets at every prompt (`ESC ]0;me@box: ~ BEL`) comes out as text, and
 * it cannot tell where an unfinished sequence starts, which a reader that goes on later needs.
 */

import { incompleteUtf8Tail } from './utf8-tail.js'

/** Text for a reader, and how many bytes at the end of the input were left for the next read. */
export interface PlainTextChunk {
  text: string
  /**
   * Trailing UTF-8 bytes not turned into text: an escape sequence or a character that the next
   * bytes may finish. A reader's cursor stops before them and reads them again with what follows.
   */
  heldBackBytes: number
}

export interface PlainTextOptions {
  /**
   * No more output will follow (the task has ended and this is the end of its output): an
   * unfinished sequence at the end is dropped rather than held back.
   */
  final: boolean
}

/**
 * The longest unfinished sequence held back. An OSC that never ends (a program killed halfway
 * through a title) must not stop a reader for good: past this it is dropped as read.
 */
export const MAX_HELD_BACK_BYTES = 4096

/** The whole of a terminal's output as plain text (nothing held back). */
export function plainText(raw: string | Uint8Array): string {
  return plainTextChunk(raw, { final: true }).text
}

/**
 * Plain text of a stretch of terminal output that may end in the middle of an escape sequence or a
 * UTF-8 character, as an incremental read does: those trailing bytes are left out of the text and
 * counted in `heldBackBytes`, unless `final`.
 */
export function plainTextChunk(raw: string | Uint8Array, options: PlainTextOptions): PlainTextChunk {
  let input: string
  let partialBytes = 0
  if (typeof raw === 'string') input = raw
  else {
    const bytes = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength)
    partialBytes = options.final ? 0 : incompleteUtf8Tail(bytes)
    input = bytes.subarray(0, bytes.length - partialBytes).toString('utf8')
  }
  const { text, unfinishedAt } = render(input)
  if (unfinishedAt === -1) return { text, heldBackBytes: partialBytes }
  const unfinishedBytes = Buffer.byteLength(input.slice(unfinishedAt)) + partialBytes
  if (options.final || unfinishedBytes > MAX_HELD_BACK_BYTES) return { text, heldBackBytes: 0 }
  return { text, heldBackBytes: unfinishedBytes }
}

const BEL = 0x07
const BS = 0x08
const TAB = 0x09
const LF = 0x0a
const CR = 0x0d
const CAN = 0x18
const SUB = 0x1a
const ESC = 0x1b
/** C0 controls, DEL and the C1 controls: nothing of them is text. */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g

/** Draws `input` line by line; `unfinishedAt` is where a sequence the input ends inside starts (-1: none). */
function render(input: string): { text: string; unfinishedAt: number } {
  const done: string[] = []
  const line = new LineCursor()
  let index = 0
  while (index < input.length) {
    CONTROL.lastIndex = index
    const found = CONTROL.exec(input)
    const at = found ? found.index : input.length
    line.draw(input.slice(index, at))
    if (!found) break
    const code = input.charCodeAt(at)
    if (code === ESC) {
      const end = escapeEnd(input, at)
      if (end === -1) return { text: done.join('') + line.text, unfinishedAt: at }
      if (isEraseLine(input, at, end)) line.erased()
      index = end
      continue
    }
    if (code === LF) done.push(line.take(), '\n')
    else if (code === CR) line.toStart()
    else if (code === BS) line.backspace()
    else if (code === TAB) line.draw('\t')
    index = at + 1
  }
  return { text: done.join('') + line.text, unfinishedAt: -1 }
}

/**
 * The line being drawn and where the cursor is on it. At its end (the usual case) text is
 * appended; after a lone `\r` it is drawn over the old characters one by one, as a terminal does,
 * so what was not drawn over stays readable. An erase of the line after the `\r` (`ESC [K`) makes
 * what is drawn next replace the line; with nothing drawn after it, the line stays as it was (a
 * prompt that clears itself as a program ends is still read).
 */
class LineCursor {
  /** The line while it has only been appended to. */
  private head = ''
  /** The line as characters (code points) once a `\r` came: drawing over one costs what is drawn, not the line. */
  private cells: string[] | null = null
  /** Where the next character goes in `cells`; null: at the line's end. */
  private column: number | null = null
  private replaceNext = false
  /** Something was drawn over characters of this line (after a `\r` or backspaces). */
  private drawnOver = false

  get text(): string {
    if (this.cells === null) return this.head
    // Spaces drawn over the end of a line (the echo of an erase, `\b \b`) show as nothing. Counted
    // from the end in one pass: a regex's / +$/ is quadratic on a long run of spaces before a letter.
    let end = this.cells.length
    if (this.drawnOver) while (end > 0 && this.cells[end - 1] === ' ') end--
    return this.cells.slice(0, end).join('')
  }

  draw(text: string): void {
    if (text === '') return
    if (this.replaceNext) {
      this.cells = null
      this.head = text
      this.column = null
      this.drawnOver = false
    } else if (this.cells === null) this.head += text
    else {
      const cells = this.cells
      for (const character of text) {
        if (this.column === null) cells.push(character)
        else {
          cells[this.column] = character
          this.drawnOver = true
          this.column += 1
          if (this.column >= cells.length) this.column = null
        }
      }
    }
    this.replaceNext = false
  }

  toStart(): void {
    this.replaceNext = false
    if (this.cells === null) {
      if (this.head === '') return
      this.cells = Array.from(this.head)
    }
    if (this.cells.length > 0) this.column = 0
  }

  erased(): void {
    if (this.column === 0) this.replaceNext = true
  }

  backspace(): void {
    if (this.column !== null) {
      if (this.column > 0) this.column -= 1
      return
    }
    if (this.cells === null) {
      if (this.head === '') return
      this.cells = Array.from(this.head)
    }
    if (this.cells.length > 0) this.column = this.cells.length - 1
  }

  take(): string {
    const text = this.text
    this.head = ''
    this.cells = null
    this.column = null
    this.replaceNext = false
    this.drawnOver = false
    return text
  }
}

/** `ESC [ K`, `ESC [ 0 K` or `ESC [ 2 K`: the line erased from the cursor, or whole. */
function isEraseLine(input: string, start: number, end: number): boolean {
  if (input[start + 1] !== '[' || input[end - 1] !== 'K') return false
  const parameter = input.slice(start + 2, end - 1)
  return parameter === '' || parameter === '0' || parameter === '2'
}

/**
 * The index just past the escape sequence that starts at `start` (an ESC), or -1 when the input
 * ends inside it. A sequence broken off by a character that cannot be part of it ends before
 * that character, which is then read as usual (as a terminal does).
 */
function escapeEnd(input: string, start: number): number {
  let index = start + 1
  if (index >= input.length) return -1
  const kind = input[index]
  if (kind === '[') {
    // CSI: parameters 0x30–0x3F and intermediates 0x20–0x2F, then one final byte 0x40–0x7E.
    for (index += 1; index < input.length; index++) {
      const code = input.charCodeAt(index)
      if (code >= 0x40 && code <= 0x7e) return index + 1
      if (code < 0x20 || code > 0x3f) return index
    }
    return -1
  }
  if (kind === ']' || kind === 'P' || kind === 'X' || kind === '^' || kind === '_') {
    // OSC, DCS, SOS, PM, APC: a string ended by BEL or ST (ESC \); CAN and SUB cancel it. A reader
    // ends it at its line's end too: the newline is then read as usual.
    for (index += 1; index < input.length; index++) {
      const code = input.charCodeAt(index)
      if (code === BEL || code === 0x9c || code === CAN || code === SUB) return index + 1
      if (code === LF) return index
      if (code === ESC) {
        if (index + 1 >= input.length) return -1
        return input[index + 1] === '\\' ? index + 2 : index
      }
    }
    return -1
  }
  // The short forms: intermediates 0x20–0x2F (charset designations `ESC ( B`, `ESC # 8`), then a
  // final 0x30–0x7E (`ESC 7`, `ESC =`, `ESC M`).
  while (index < input.length && input.charCodeAt(index) >= 0x20 && input.charCodeAt(index) <= 0x2f) index++
  if (index >= input.length) return -1
  const code = input.charCodeAt(index)
  return code >= 0x30 && code <= 0x7e ? index + 1 : index
}
