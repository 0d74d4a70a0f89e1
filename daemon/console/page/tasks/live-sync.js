// Keeps the task store in step with the daemon: one full list, then the event stream, plus a poll
// of the active tasks for what events do not carry: output growth, ports, live CPU and memory.

import { api, isSessionEnded, listTasks, onSessionEnded, SessionEndedError } from '../shared/api.js'
import * as store from './task-store.js'
import * as usage from './usage-history.js'

const EVENT_TYPES = ['task.queued', 'task.started', 'task.ready', 'task.exited', 'task.killed', 'task.timed_out', 'task.failed', 'task.lost', 'task.removed']
/** Live figures are sampled when asked, at most once a second: the page asks no more often, and only while shown. */
const ACTIVE_POLL_MS = 1000
const MAX_RETRY_MS = 30_000

let source = null
/** Events that arrived while the list was loading: applied after it, so none is lost. */
let pending = null
let daemonId = null
let retryMs = 1000
let retryTimer = null
let pollTimer = null
/** A poll still answering: the next is skipped rather than piled up behind it. */
let polling = false
let report = () => {}
let reportError = () => {}
let listed
/** Resolves once the first full list is in the store. */
export const firstList = new Promise((resolve) => {
  listed = resolve
})

/**
 * onConnection(text) gets `live`, `reconnecting` or `session ended`; onError(error) gets failures
 * worth telling the operator about.
 */
export function startLiveSync({ onConnection, onError }) {
  report = onConnection
  reportError = onError
  onSessionEnded(stop)
  open()
  pollTimer = setInterval(pollActive, ACTIVE_POLL_MS)
}

function stop() {
  source?.close()
  source = null
  pending = null
  clearTimeout(retryTimer)
  clearInterval(pollTimer)
  report('session ended')
}

// The stream is opened before the list is asked for, and the list only once the stream is open:
// a change made between the two is then in the stream, never lost in the gap.
function open() {
  if (isSessionEnded()) return
  clearTimeout(retryTimer)
  source?.close()
  const events = new EventSource('/v1/events')
  source = events
  pending = []
  report('reconnecting')
  let heard = false
  events.addEventListener('open', () => {
    if (events !== source) return
    // A reconnect is replayed what it missed only from the last event it got (Last-Event-ID):
    // a stream that got none yet reconnects from "now", so the list is asked for again.
    if (!pending && !heard) pending = []
    if (pending) void loadList(events)
    else report('live')
  })
  for (const type of EVENT_TYPES) {
    events.addEventListener(type, (message) => {
      if (events !== source) return
      heard = true
      let event
      try {
        event = JSON.parse(message.data)
      } catch {
        return
      }
      if (pending) pending.push(event)
      else apply(event)
    })
  }
  events.addEventListener('error', () => {
    if (events !== source) return
    // CONNECTING: the browser reconnects by itself with Last-Event-ID and is replayed what it missed.
    // CLOSED: the daemon refused the reconnect (a gap it no longer covers, or no session any more).
    if (events.readyState === EventSource.CLOSED) void recover()
    else report('reconnecting')
  })
}

async function loadList(events) {
  try {
    const list = await listTasks(true)
    if (events !== source) return
    store.replaceAll(list)
    const missed = pending
    pending = null
    for (const event of missed) apply(event)
    retryMs = 1000
    listed()
    report('live')
  } catch (error) {
    if (error instanceof SessionEndedError) return
    reportError(error)
    if (events === source) void recover()
  }
}

function apply(event) {
  if (daemonId !== null && event.daemonId !== daemonId) {
    // Another daemon's numbering: what the page holds cannot be patched, only reloaded.
    daemonId = event.daemonId
    open()
    return
  }
  daemonId = event.daemonId
  if (event.type === 'task.removed') store.remove(event.taskId)
  else store.upsert(event.task)
}

async function recover() {
  source?.close()
  source = null
  pending = null
  report('reconnecting')
  try {
    await api('/v1/status')
  } catch (error) {
    if (error instanceof SessionEndedError) return
  }
  // Reachable or not, try again after a pause that grows while the daemon stays away.
  retryTimer = setTimeout(open, retryMs)
  retryMs = Math.min(retryMs * 2, MAX_RETRY_MS)
}

async function pollActive() {
  if (polling || !source || pending || store.countOf('running') === 0 || document.hidden) return
  polling = true
  try {
    const active = await listTasks(false, { live: true })
    for (const task of active) {
      if (task.live) usage.record(task.id, task.live)
      store.upsert(task)
    }
  } catch {
    // The stream's own error handling reports an unreachable daemon; a 401 ends the session.
  } finally {
    polling = false
  }
}

/** After a change made from the page (gc), without waiting for its events. */
export function forgetTasks(ids) {
  for (const id of ids) store.remove(id)
}
