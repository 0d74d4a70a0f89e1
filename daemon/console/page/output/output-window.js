// The part of an output the page shows: contiguous chunks covering bytes [first, next), at most
// WINDOW_BYTES of them whatever the output's size. New output pushes the oldest chunks out at the
// top; earlier output, loaded on request, pushes the newest out at the bottom.

import { TerminalAnsi } from '../shared/terminal-colours.js'

export const WINDOW_BYTES = 512 * 1024

function newAnsi() {
  const ansi = new TerminalAnsi()
  // Output is untrusted: no clickable links (OSC 8) from it.
  ansi.url_allowlist = {}
  return ansi
}

/**
 * A chunk of whole lines is a block, so that new output lays out only itself: inline, every
 * append would lay out the whole window's text again (twice the cost). A chunk that starts or
 * ends mid-line stays inline, or it would break that line in two.
 */
function render(ansi, data, startsLine) {
  // A terminal's \r\n is one line break; a bare \r left at a chunk's end would show as a space.
  const text = data.replace(/\r+\n/g, '\n').replace(/\r+$/, '')
  const element = document.createElement('span')
  element.className = 'chunk'
  const endsLine = text.endsWith('\n')
  if (startsLine && endsLine) element.classList.add('lines')
  // AnsiUp escapes the text it is given: its HTML is the only HTML made from task data.
  element.innerHTML = ansi.ansi_to_html(text)
  return { element, endsLine }
}

export class OutputWindow {
  constructor(element) {
    this.element = element
    this.clear(0)
  }

  /** Empties the window, to go on from byte `at`. */
  clear(at) {
    this.element.replaceChildren()
    this.chunks = []
    this.first = at
    this.next = at
    // One AnsiUp per stream, so that a colour set in one chunk carries into the next; a jump
    // starts a new stream, whose colours before the jump are unknown.
    this.ansi = newAnsi()
  }

  /** A read that continues at `next`; returns the new chunk's element, or null when it was empty. */
  append(result) {
    if (result.next <= result.from) {
      if (this.chunks.length === 0) this.first = this.next = result.next
      return null
    }
    const last = this.chunks[this.chunks.length - 1]
    const { element, endsLine } = render(this.ansi, result.data, !last || last.endsLine)
    this.element.append(element)
    if (this.chunks.length === 0) this.first = result.from
    this.chunks.push({ from: result.from, next: result.next, element, endsLine })
    this.next = result.next
    while (this.next - this.first > WINDOW_BYTES && this.chunks.length > 1) {
      this.chunks.shift().element.remove()
      this.first = this.chunks[0].from
    }
    return element
  }

  /**
   * A read that ends at `first` (or a few bytes before: a read stops short of a cut character).
   * Returns the new element and whether the end of the window was dropped.
   */
  prepend(result) {
    if (result.next <= result.from) return { element: null, cut: false }
    // Its colours at its start are unknown, and it must not disturb the stream going on below.
    const { element, endsLine } = render(newAnsi(), result.data, true)
    const scroller = this.element
    const height = scroller.scrollHeight
    // What was first may now continue a line.
    if (!endsLine) this.chunks[0]?.element.classList.remove('lines')
    scroller.prepend(element)
    this.chunks.unshift({ from: result.from, next: result.next, element, endsLine })
    this.first = result.from
    let cut = false
    while (this.next - this.first > WINDOW_BYTES && this.chunks.length > 1) {
      this.chunks.pop().element.remove()
      this.next = this.chunks[this.chunks.length - 1].next
      cut = true
    }
    if (cut) this.ansi = newAnsi()
    // The lines being read stay where they were on screen.
    scroller.scrollTop += scroller.scrollHeight - height
    return { element, cut }
  }
}
