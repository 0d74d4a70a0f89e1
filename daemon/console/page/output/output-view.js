// A task's output: the last lines, then followed with long-polls. Outputs can be gigabytes: the
// page shows a bounded window of it (output-window.js), "Earlier" pages backwards, and a reader
// that falls too far behind skips ahead to the end instead of streaming everything in between.

import { api, isAbort, sleep, taskPath, SessionEndedError } from '../shared/api.js'
import { markNew, resetSearch, updateCount } from './output-search.js'
import { formatBytes } from '../shared/format.js'
import { OutputWindow, WINDOW_BYTES } from './output-window.js'
import { TerminalWindow } from './terminal-window.js'

// 64 KiB per read: the daemon's answer (the text as a JSON string) then stays under V8's
// large-object size and dies young; 256 KiB answers piled up in its old generation until a full
// GC (+15 MiB of daemon memory while following a flooding task).
const READ_BYTES = 64 * 1024
const TAIL_LINES = 200
const WAIT_MS = 25_000
/** A pause after each answer lets a chatty task's lines arrive together rather than one request each. */
const SETTLE_MS = 150
const RETRY_MS = 2000

let el
let view = null

export function setupOutputView(elements) {
  el = elements
  el.follow.addEventListener('change', () => {
    if (!view) return
    if (el.follow.checked) {
      scrollToEnd()
      void follow(view)
    } else {
      view.poll?.abort()
    }
    showStatus()
  })
  el.earlier.addEventListener('click', () => void loadEarlier())
}

/** A terminal task's output goes into a live terminal, any other's into the log view. */
export function openOutput(task) {
  closeOutput()
  const { id } = task
  el.output.hidden = Boolean(task.tty)
  el.terminal.hidden = !task.tty
  // The search finds text in the log view only.
  el.terminal.closest('section')?.classList.toggle('with-terminal', Boolean(task.tty))
  const shown = task.tty ? new TerminalWindow(el.terminal, task) : new OutputWindow(el.output)
  view = { id, controller: new AbortController(), poll: null, shown, outputBytes: 0, done: false, note: '', state: null }
  el.follow.checked = true
  el.download.href = taskPath(id, '/output.log')
  el.download.setAttribute('download', `tend-${id}-output.log`)
  resetSearch()
  showRange()
  void start(view)
}

/** Stops every request of the open task. */
export function closeOutput() {
  if (!view) return
  view.controller.abort()
  view.shown.dispose?.()
  view = null
  el.output.replaceChildren()
}

/** A newer record of the open task (from events or polls): its size and state. */
export function outputTaskChanged(task) {
  if (!view || task.id !== view.id) return
  view.outputBytes = task.outputBytes
  view.state = task.state
  view.shown.taskChanged?.(task)
  showRange()
}

export function outputTaskRemoved() {
  if (!view) return
  view.controller.abort()
  view.note = 'the task was removed'
  showStatus()
}

async function read(v, params, signal = v.controller.signal) {
  const query = new URLSearchParams({ maxBytes: String(READ_BYTES), ...params })
  const result = await api(taskPath(v.id, `/output?${query}`), { signal })
  v.outputBytes = result.outputBytes
  v.state = result.state
  return result
}

async function start(v) {
  try {
    let result = await read(v, { tail: String(TAIL_LINES) })
    // Lines longer than a read: show the end, not the start of the last lines.
    if (result.truncated) result = await read(v, { from: String(Math.max(result.next, result.outputBytes - READ_BYTES)) })
    append(v, result)
    if (el.follow.checked) void follow(v)
  } catch (error) {
    fail(v, error)
  }
  showStatus()
}

async function follow(v) {
  if (v.poll || v.done || v !== view) return
  const poll = new AbortController()
  const stop = () => poll.abort()
  v.controller.signal.addEventListener('abort', stop, { once: true })
  v.poll = poll
  showStatus()
  try {
    while (v === view && !v.done && !poll.signal.aborted) {
      try {
        const result = await read(v, { from: String(v.shown.next), waitMs: String(WAIT_MS) }, poll.signal)
        if (result.outputBytes - result.next > WINDOW_BYTES) {
          await skipAhead(v, result, poll.signal)
        } else {
          append(v, result, true)
          if (!result.truncated && !v.done) await sleep(SETTLE_MS, poll.signal)
        }
        if (v.note) {
          v.note = ''
          showStatus()
        }
      } catch (error) {
        if (isAbort(error) || error instanceof SessionEndedError || error.status === 404 || error.status === 410) throw error
        // The daemon may be restarting or busy: keep trying while the view is open.
        v.note = `retrying: ${error.message}`
        showStatus()
        await sleep(RETRY_MS, poll.signal)
      }
    }
  } catch (error) {
    if (!isAbort(error)) fail(v, error)
  } finally {
    v.controller.signal.removeEventListener('abort', stop)
    if (v.poll === poll) v.poll = null
    showStatus()
  }
}

// Reading through everything between would load the whole output into the page, a chunk at a
// time: the window restarts near the end, and "Earlier" reaches what was passed.
async function skipAhead(v, behind, signal) {
  const from = Math.max(behind.next, behind.outputBytes - READ_BYTES)
  const result = await read(v, { from: String(from) }, signal)
  v.shown.clear(from)
  append(v, result)
  v.skipped = `skipped ${formatBytes(from - behind.from)} to keep up`
}

/** live: output that has just come, rather than what was there before the page looked (a terminal answers only the former). */
function append(v, result, live = false) {
  if (v !== view) return
  v.done = result.done
  const element = v.shown.append(result, live)
  if (element) {
    markNew(element)
    updateCount()
  }
  if (el.follow.checked) scrollToEnd()
  showRange()
}

async function loadEarlier() {
  const v = view
  if (!v || v.shown.first === 0 || v.loadingEarlier || !v.shown.prepend) return
  // Reading back while new lines pull the page down would be impossible: following pauses.
  el.follow.checked = false
  v.poll?.abort()
  v.loadingEarlier = true
  showRange()
  try {
    const first = v.shown.first
    const from = Math.max(0, first - READ_BYTES)
    const result = await read(v, { from: String(from), maxBytes: String(first - from) })
    if (v !== view) return
    const { element, cut } = v.shown.prepend(result)
    // Its end is no longer shown: following again reads it anew.
    if (cut) v.done = false
    if (element) {
      markNew(element)
      updateCount()
    }
  } catch (error) {
    fail(v, error)
  } finally {
    v.loadingEarlier = false
    showRange()
    showStatus()
  }
}

function fail(v, error) {
  if (v !== view || isAbort(error) || error instanceof SessionEndedError) return
  v.note = error.message || String(error)
  showStatus()
}

function scrollToEnd() {
  el.output.scrollTop = el.output.scrollHeight
}

function showRange() {
  if (!view) return
  const { first, next } = view.shown
  el.range.textContent = `bytes ${first}–${next} of ${view.outputBytes}`
  el.range.title = `${formatBytes(next - first)} shown of ${formatBytes(view.outputBytes)}`
  // A terminal shows what it was sent from where it began: earlier bytes would draw it wrong.
  el.earlier.disabled = first === 0 || Boolean(view.loadingEarlier) || !view.shown.prepend
}

function showStatus() {
  if (!view) return
  const v = view
  let text
  if (v.note) text = v.note
  else if (v.done) text = v.state ? `end of output (task ${v.state})` : 'end of output'
  else if (v.poll) text = v.skipped ? `following · ${v.skipped}` : 'following'
  else if (el.follow.checked) text = 'loading'
  else text = 'paused'
  el.status.textContent = text
  el.output.dataset.placeholder = v.done ? 'no output' : v.note ? '' : 'no output yet'
}
