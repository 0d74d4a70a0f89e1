// A terminal task's output in a live terminal (xterm.js): the bytes the log view would show are
// written into it as they come, keys typed into it are the task's input, and its size, fitted to
// the page, is sent as the task's terminal size when it changes. Stands in for OutputWindow.

import { Terminal } from '/console/vendor/xterm.mjs'
import { FitAddon } from '/console/vendor/addon-fit.mjs'
import { api, taskPath } from '../shared/api.js'
import { showError } from '../shared/messages.js'
import { isReadOnly } from '../shared/session.js'
import { sendInput } from './input-box.js'

/** Resizing the window fires many times: the last size is sent once it settles. */
const RESIZE_SETTLE_MS = 200
const SCROLLBACK_LINES = 5000
const ANSI_COLOURS = ['black', 'red', 'green', 'yellow', 'blue', 'magenta', 'cyan', 'white']
const DARK = matchMedia('(prefers-color-scheme: dark)')

/**
 * The log view's colours, from the page's style (--term-bg, --term-text and, where the page has a
 * palette, --ansi-red, --ansi-bright-red…), so that a terminal reads as the log view does on each
 * theme; what the page leaves out keeps xterm's own.
 */
function themeOf(element) {
  const style = getComputedStyle(element)
  const theme = {}
  const take = (key, name) => {
    const value = style.getPropertyValue(name).trim()
    if (value) theme[key] = value
  }
  take('background', '--term-bg')
  take('foreground', '--term-text')
  take('cursor', '--term-text')
  for (const colour of ANSI_COLOURS) {
    take(colour, `--ansi-${colour}`)
    take(`bright${colour[0].toUpperCase()}${colour.slice(1)}`, `--ansi-bright-${colour}`)
  }
  return theme
}

export class TerminalWindow {
  /** element: the terminal's container, shown; task: its record (its tty size and state). */
  constructor(element, task) {
    this.element = element
    this.id = task.id
    this.sent = { cols: task.tty.cols, rows: task.tty.rows }
    this.terminal = new Terminal({
      cols: task.tty.cols,
      rows: task.tty.rows,
      scrollback: SCROLLBACK_LINES,
      convertEol: false,
      // Output is untrusted: its links (OSC 8) open nothing.
      linkHandler: { activate: () => undefined },
      fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, monospace',
      fontSize: 13,
      theme: themeOf(element),
    })
    this.fit = new FitAddon()
    this.terminal.loadAddon(this.fit)
    element.replaceChildren()
    this.terminal.open(element)
    // What the terminal sends is keys typed, or its answers to what the output asks (the cursor's
    // place, its kind): answers to output written before this page looked would be stale input,
    // and only the page being typed in answers (every open page would, else, each once).
    this.quiet = 0
    this.terminal.onData((data) => {
      if (this.running && this.quiet === 0 && element.contains(document.activeElement)) sendInput({ text: data }, 'Typing')
    })
    this.retheme = () => {
      this.terminal.options.theme = themeOf(element)
    }
    DARK.addEventListener('change', this.retheme)
    this.observer = new ResizeObserver(() => this.fitSoon())
    this.observer.observe(element)
    this.taskChanged(task)
    this.fitNow()
    this.clear(0)
  }

  /** The task's newer record: whether keys and sizes still reach it. */
  taskChanged(task) {
    this.running = task.state === 'running'
    this.terminal.options.disableStdin = !this.running || isReadOnly()
    // A read-only page shows the terminal at the task's own size: it may not change it.
    if (isReadOnly() && task.tty && (task.tty.cols !== this.terminal.cols || task.tty.rows !== this.terminal.rows)) {
      this.terminal.resize(task.tty.cols, task.tty.rows)
    }
    this.showSize()
  }

  clear(at) {
    this.terminal.reset()
    this.first = at
    this.next = at
  }

  /** A read that continues at `next`: written into the terminal; there is no element to mark. */
  append(result, live) {
    if (result.next <= result.from) {
      if (this.next === this.first) this.first = this.next = result.next
      return null
    }
    if (live) {
      this.terminal.write(result.data)
    } else {
      this.quiet++
      this.terminal.write(result.data, () => this.quiet--)
    }
    this.next = result.next
    return null
  }

  dispose() {
    clearTimeout(this.timer)
    this.observer.disconnect()
    DARK.removeEventListener('change', this.retheme)
    this.terminal.dispose()
    this.element.replaceChildren()
    delete this.element.dataset.size
  }

  fitSoon() {
    clearTimeout(this.timer)
    this.timer = setTimeout(() => this.fitNow(), RESIZE_SETTLE_MS)
  }

  fitNow() {
    if (isReadOnly() || this.element.hidden) return
    this.fit.fit()
    this.showSize()
    const { cols, rows } = this.terminal
    if (!this.running || (cols === this.sent.cols && rows === this.sent.rows)) return
    this.sent = { cols, rows }
    api(taskPath(this.id, '/resize'), { method: 'POST', body: { cols, rows } }).catch((error) => {
      // Sent again at the next fit.
      this.sent = { cols: 0, rows: 0 }
      if (this.running) showError(error, `Resizing the terminal of task ${this.id}`)
    })
  }

  showSize() {
    this.element.dataset.size = `${this.terminal.cols}x${this.terminal.rows}`
  }
}
