// The open task: its record, kept live from the store, its output, its input, and the kill,
// remove and run-again actions.

import { api, taskPath } from '../shared/api.js'
import { firstList } from './live-sync.js'
import * as store from './task-store.js'
import { formatBytes, formatDuration, formatRunTime, formatTime, isActive, isTaskId, quotedCommand, stateLook, visible } from '../shared/format.js'
import { closeOutput, openOutput, outputTaskChanged, outputTaskRemoved } from '../output/output-view.js'
import { confirmAction } from '../shared/confirm.js'
import { showError, showNote } from '../shared/messages.js'
import { select } from './task-table.js'
import { closeNetwork, networkTaskChanged, openNetwork } from './network-view.js'
import { closeAids, openAids, showAids } from './aids-view.js'
import { inputTaskChanged } from '../output/input-box.js'
import { runAgainTaskChanged } from './run-again.js'
import { isReadOnly, READ_ONLY_REASON, sessionKnown } from '../shared/session.js'
import { busy } from '../shared/busy-button.js'

const MAX_GRACE_MS = 3_600_000

/** The dictionary's fields: the text of each, from a task. */
const FIELDS = {
  state: (t) => stateLook(t).label,
  id: (t) => t.id,
  name: (t) => (t.name ? visible(t.name) : '—'),
  owner: (t) => visible(t.owner),
  command: (t) => quotedCommand(t),
  cwd: (t) => visible(t.cwd),
  sandbox: (t) => `${t.sandbox}${t.memoryBytes ? `, memory ${formatBytes(t.memoryBytes)}` : ''}${t.pidsMax ? `, ${t.pidsMax} processes` : ''}`,
  network: (t) => networkField(t),
  createdAt: (t) => formatTime(t.createdAt),
  startedAt: (t) => formatTime(t.startedAt),
  endedAt: (t) => formatTime(t.endedAt),
  runtime: (t) => runtime(t),
  exitCode: (t) => (t.exitCode ?? '—').toString(),
  signal: (t) => t.signal ?? '—',
  stoppedBy: (t) => t.stoppedBy ?? '—',
  reason: (t) => (t.reason ? visible(t.reason) : '—'),
  output: (t) => `${formatBytes(t.outputBytes)} of ${formatBytes(t.maxOutputBytes)} cap`,
  pid: (t) => (t.pid ?? '—').toString(),
  timeout: (t) => (t.timeoutMs ? formatDuration(t.timeoutMs) : 'none'),
  lifetime: (t) => `${t.lifetime ?? 'owner'}${t.tty ? ` · terminal ${t.tty.cols}×${t.tty.rows}` : ''}`,
}

let el
let currentId = null
let removed = false

export function setupTaskView(elements) {
  el = elements
  el.close.addEventListener('click', () => {
    location.hash = '#/'
  })
  el.kill.addEventListener('click', () => void kill())
  el.remove.addEventListener('click', () => void removeTask())
  store.subscribe((kind, task) => {
    if (task.id !== currentId) return
    if (kind === 'remove') markRemoved()
    else show(task)
  })
  setInterval(() => {
    const task = currentId && store.get(currentId)
    if (task && isActive(task) && !document.hidden) setField('runtime', runtime(task))
  }, 1000)
}

/** Its mode, and in short what the proxy refused (the network section below has every decision). */
function networkField(task) {
  const blocked = task.networkUse?.blocked ?? 0
  return `${task.network}${blocked ? ` · ${blocked} blocked` : ''}`
}

function runtime(task) {
  if (!task.startedAt) return task.state === 'queued' ? `queued for ${formatDuration(Date.now() - Date.parse(task.createdAt))}` : '—'
  if (!task.endedAt) return formatDuration(Date.now() - Date.parse(task.startedAt))
  return formatRunTime(Date.parse(task.endedAt) - Date.parse(task.startedAt))
}

export async function openTask(id) {
  if (id === currentId) return
  if (!isTaskId(id)) {
    showError(`"${visible(id)}" is not a task id`)
    location.hash = '#/'
    return
  }
  closeTask()
  currentId = id
  removed = false
  el.view.hidden = false
  document.body.classList.add('task-open')
  select(id)
  clearFields()
  // A link opened with the page waits for the list; the store then knows every task there is.
  await Promise.all([firstList, sessionKnown])
  if (currentId !== id) return
  const task = store.get(id)
  if (!task) {
    showError(`There is no task ${id}: it was removed, or never existed.`)
    location.hash = '#/'
    return
  }
  show(task)
  openAids(task)
  openNetwork(task)
  openOutput(task)
}

export function closeTask() {
  if (currentId === null) return
  closeOutput()
  closeNetwork()
  closeAids()
  inputTaskChanged(null)
  runAgainTaskChanged(null)
  currentId = null
  el.view.hidden = true
  document.body.classList.remove('task-open')
  select(null)
}

function setField(name, text) {
  const target = el.fields[name]
  if (target && target.textContent !== text) target.textContent = text
}

function clearFields() {
  for (const name of Object.keys(FIELDS)) setField(name, '…')
  el.title.textContent = currentId
  el.kill.disabled = true
  el.remove.disabled = true
}

function show(task) {
  for (const [name, text] of Object.entries(FIELDS)) setField(name, text(task))
  el.fields.state.className = stateLook(task).className
  el.title.textContent = task.name ? `${visible(task.name)} (${task.id})` : `Task ${task.id}`
  el.fields.command.title = task.shell ? 'a shell line (sh -c)' : 'the program and its arguments'
  el.kill.disabled = removed || isReadOnly() || !isActive(task) || el.kill.dataset.busy === 'true'
  el.remove.disabled = removed || isReadOnly() || isActive(task) || el.remove.dataset.busy === 'true'
  el.kill.title = el.remove.title = isReadOnly() ? READ_ONLY_REASON : ''
  outputTaskChanged(task)
  inputTaskChanged(task)
  runAgainTaskChanged(task)
  networkTaskChanged(task)
  showAids(task)
}

function markRemoved() {
  removed = true
  el.kill.disabled = true
  el.remove.disabled = true
  el.fields.state.textContent = 'removed'
  el.fields.state.className = 'badge state-removed'
  inputTaskChanged(null)
  runAgainTaskChanged(null)
  outputTaskRemoved()
}

function describe(task) {
  return [`Task ${task.id}${task.name ? ` “${visible(task.name)}”` : ''}, owner ${visible(task.owner)}:`, quotedCommand(task)]
}

async function kill() {
  const id = currentId
  const task = store.get(id)
  if (!task) return
  const signal = el.signal.value
  const graceText = el.grace.value.trim()
  const graceMs = graceText === '' ? 3000 : Number(graceText)
  if (!Number.isInteger(graceMs) || graceMs < 0 || graceMs > MAX_GRACE_MS) {
    showError(`The grace period must be a whole number of milliseconds from 0 to ${MAX_GRACE_MS}.`)
    el.grace.focus()
    return
  }
  const lines = describe(task)
  lines.push(signal === 'SIGKILL' ? 'It is sent SIGKILL at once, with its whole process tree.' : `It is sent ${signal}, then SIGKILL after ${graceMs} ms if any of its processes is left.`)
  const ok = await confirmAction({ title: `Kill task ${id}?`, lines, okLabel: `Kill (${signal})` })
  if (!ok) return
  await busy(el.kill, 'Killing…', async () => {
    const result = await api(taskPath(id, '/kill'), { method: 'POST', body: { signal, graceMs } })
    store.upsert(result)
    showNote(`Task ${id} ${result.state}${result.signal ? ` (${result.signal})` : ''}.`)
  }, `Kill task ${id}`, showCurrent)
}

async function removeTask() {
  const id = currentId
  const task = store.get(id)
  if (!task) return
  const lines = describe(task)
  lines.push(`Its record and its output (${formatBytes(task.outputBytes)}) are deleted from the spool.`)
  const ok = await confirmAction({ title: `Remove task ${id}?`, lines, okLabel: 'Remove' })
  if (!ok) return
  await busy(el.remove, 'Removing…', async () => {
    const result = await api(taskPath(id), { method: 'DELETE', body: {} })
    store.remove(id)
    showNote(`Removed task ${id}, freed ${formatBytes(result.freedBytes)}.`)
    if (currentId === id) location.hash = '#/'
  }, `Remove task ${id}`, showCurrent)
}

function showCurrent() {
  const task = currentId && store.get(currentId)
  if (task) show(task)
}
