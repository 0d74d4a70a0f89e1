// A task's output: the last lines, then followed with long-polls. Outputs can be gigabytes, so
// the page holds one contiguous window of at most WINDOW_BYTES: old chunks leave from the top as
// new ones arrive, "Earlier" pages backwards (dropping from the bottom), and a reader that falls
// too far behind skips ahead to the end instead of streaming everything in between.

import { AnsiUp } from '/console/vendor/ansi_up.js'
import { api, isAbort, sleep, taskPath, SessionEndedError } from './api.js'
import { markNew, resetSearch, updateCount } from './output-search.js'
import { formatBytes } from './format.js'

const WINDOW_BYTES = 512 * 1024
const READ_BYTES = 256 * 1024
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

function newAnsi() {
  const ansi = new AnsiUp()
  ansi.use_classes = false
  // Output is untrusted: no clickable links (OSC 8) from it.
  ansi.url_allowlist = {}
  return ansi
}

export function openOutput(id) {
  closeOutput()
  view = { id, controller: new AbortController(), poll: null, ansi: newAnsi(), chunks: [], first: 0, next: 0, outputBytes: 0, done: false, note: '', state: null }
  el.output.replaceChildren()
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
  view = null
  el.output.replaceChildren()
}

/** A newer record of the open task (from events or polls): its size and state. */
export function outputTaskChanged(task) {
  if (!view || task.id !== view.id) return
  view.outputBytes = task.outputBytes
  view.state = task.state
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
        const result = await read(v, { from: String(v.next), waitMs: String(WAIT_MS) }, poll.signal)
        if (result.outputBytes - result.next > WINDOW_BYTES) {
          await skipAhead(v, result, poll.signal)
        } else {
          append(v, result)
          if (!result.truncated && !v.done) await sleep(SETTLE_MS, poll.signal)
        }
        v.note = ''
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
  for (const chunk of v.chunks) chunk.element.remove()
  v.chunks = []
  v.ansi = newAnsi()
  append(v, result)
  v.skipped = `skipped ${formatBytes(from - behind.from)} to keep up`
}

function render(ansi, data) {
  const element = document.createElement('span')
  element.className = 'chunk'
  // AnsiUp escapes the text it is given: its HTML is the only HTML made from task data.
  element.innerHTML = ansi.ansi_to_html(data.replace(/\r+\n/g, '\n').replace(/\r+$/, ''))
  return element
}

function append(v, result) {
  if (v !== view) return
  v.done = result.done
  if (result.next > result.from) {
    const element = render(v.ansi, result.data)
    el.output.append(element)
    if (v.chunks.length === 0) v.first = result.from
    v.chunks.push({ from: result.from, next: result.next, element })
    v.next = result.next
    while (v.next - v.first > WINDOW_BYTES && v.chunks.length > 1) {
      v.chunks.shift().element.remove()
      v.first = v.chunks[0].from
    }
    markNew(element)
    updateCount()
  } else if (v.chunks.length === 0) {
    v.first = v.next = result.next
  }
  if (el.follow.checked) scrollToEnd()
  showRange()
}

async function loadEarlier() {
  const v = view
  if (!v || v.first === 0 || v.loadingEarlier) return
  // Reading back while new lines pull the page down would be impossible: following pauses.
  el.follow.checked = false
  v.poll?.abort()
  v.loadingEarlier = true
  showRange()
  try {
    const from = Math.max(0, v.first - READ_BYTES)
    const result = await read(v, { from: String(from), maxBytes: String(v.first - from) })
    if (v !== view || result.next <= result.from) return
    const element = render(newAnsi(), result.data)
    const height = el.output.scrollHeight
    el.output.prepend(element)
    v.chunks.unshift({ from: result.from, next: result.next, element })
    v.first = result.from
    while (v.next - v.first > WINDOW_BYTES && v.chunks.length > 1) {
      v.chunks.pop().element.remove()
      v.next = v.chunks[v.chunks.length - 1].next
      v.done = false
    }
    // The lines being read stay where they were on screen.
    el.output.scrollTop += el.output.scrollHeight - height
    markNew(element)
    updateCount()
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
  el.range.textContent = `bytes ${view.first}–${view.next} of ${view.outputBytes}`
  el.range.title = `${formatBytes(view.next - view.first)} shown of ${formatBytes(view.outputBytes)}`
  el.earlier.disabled = view.first === 0 || Boolean(view.loadingEarlier)
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
}
