// The open task's network: its mode, its counts from the record, and its network.log as a table
// (GET /v1/tasks/:id/network, read on from where it stopped whenever the record's counts move).
// Blocked decisions are rows of their own colour, with why.

import { api, isAbort, taskPath } from '../shared/api.js'
import { formatBytes, formatTime, visible } from '../shared/format.js'

/** Rows kept on the page: past this, `tend network ID` lists the rest. */
const MAX_ROWS = 2000
const PAGE = 500

let el
let currentId = null
let next = 0
let rows = 0
let seen = null
let loading = null
let again = false
let abort = null

export function setupNetworkView(elements) {
  el = elements
}

export function openNetwork(task) {
  closeNetwork()
  currentId = task.id
  abort = new AbortController()
  el.section.hidden = false
  networkTaskChanged(task)
}

export function closeNetwork() {
  abort?.abort()
  abort = null
  currentId = null
  next = 0
  rows = 0
  seen = null
  loading = null
  again = false
  el.rows.replaceChildren()
  el.table.hidden = true
  el.note.textContent = ''
  el.summary.textContent = ''
}

/** The record changed: the summary follows it, and the log is read on when its counts moved. */
export function networkTaskChanged(task) {
  if (task.id !== currentId) return
  el.summary.textContent = summaryText(task)
  el.section.dataset.network = task.network
  if (task.network === 'host') {
    el.note.textContent = "The host's network: no proxy sees this task's traffic, so nothing is recorded."
    return
  }
  const use = task.networkUse
  const counted = `${use ? use.allowed + use.blocked : 0}/${task.state}`
  if (counted === seen) return
  seen = counted
  void load(task.id)
}

function summaryText(task) {
  const use = task.networkUse
  const mode = `${task.network}${task.allowNet?.length ? `, also ${task.allowNet.map(visible).join(' ')}` : ''}`
  if (!use) return `${mode} · no connections through the proxy yet`
  const parts = [`${mode} · ${use.allowed} allowed, ${use.blocked} blocked`, `${formatBytes(use.sentBytes)} sent, ${formatBytes(use.receivedBytes)} received`]
  if (use.logOmitted) parts.push(`${use.logOmitted} not listed (network.log reached its cap)`)
  if (use.logLost) parts.push(`${use.logLost} not written (the disk refused them)`)
  return parts.join(' · ')
}

/** Reads pages from `next` until one comes back empty; a change meanwhile reads once more after. */
async function load(id) {
  if (loading) {
    again = true
    return
  }
  const signal = abort.signal
  loading = (async () => {
    do {
      again = false
      for (;;) {
        if (rows >= MAX_ROWS) {
          el.note.textContent = `The first ${MAX_ROWS} decisions are shown: tend network ${id} lists them all.`
          return
        }
        const page = await api(`${taskPath(id, '/network')}?from=${next}&limit=${Math.min(PAGE, MAX_ROWS - rows)}`, { signal })
        if (currentId !== id) return
        addRows(page.entries)
        next = page.next
        if (page.entries.length === 0) break
      }
    } while (again && currentId === id)
    if (rows === 0) el.note.textContent = 'No connections through the proxy yet.'
  })()
  try {
    await loading
  } catch (error) {
    if (!isAbort(error) && currentId === id) el.note.textContent = `The network log could not be read: ${visible(error.message)}`
  } finally {
    if (currentId === id) loading = null
  }
}

function addRows(entries) {
  if (entries.length === 0) return
  const fragment = document.createDocumentFragment()
  for (const entry of entries) fragment.append(rowOf(entry))
  el.rows.append(fragment)
  rows += entries.length
  el.table.hidden = false
  el.note.textContent = ''
}

function rowOf(entry) {
  const row = document.createElement('tr')
  row.dataset.decision = entry.decision
  const destination = entry.name.includes(':') ? `[${visible(entry.name)}]:${entry.port}` : `${visible(entry.name)}:${entry.port}`
  const outcome = entry.decision === 'blocked' ? `blocked: ${visible(entry.reason ?? 'refused')}` : entry.error ? `allowed, failed: ${visible(entry.error)}` : 'allowed'
  const cells = [formatTime(entry.time), destination, entry.via, outcome, formatBytes(entry.sentBytes), formatBytes(entry.receivedBytes)]
  const columns = ['time', 'destination', 'via', 'decision', 'sent', 'received']
  cells.forEach((text, index) => {
    const cell = document.createElement('td')
    cell.dataset.col = columns[index]
    cell.textContent = text
    row.append(cell)
  })
  if (entry.address) row.cells[1].title = `connected to ${entry.address}`
  return row
}
