// The live task table. With thousands of tasks and bursts of events, the table is never rebuilt:
// each task has one row kept in a Map, changes are collected and applied once per animation
// frame, a cell is written only when its text changed, and filters only toggle row.hidden.
// Where rows go is row-groups.js's concern.

import * as store from './task-store.js'
import { createRowGroups } from './row-groups.js'
import * as usage from './usage-history.js'
import { portsKey, renderPorts } from './port-links.js'
import { commandLine, formatBytes, formatTime, isActive, isFailure, stateLook, stoppedText, taskAge, visible } from '../shared/format.js'
import { afterText, readinessKind, readinessText, stateNote, usageCells, usageText } from '../shared/aids-format.js'

const COLUMNS = ['state', 'id', 'command', 'owner', 'age', 'cpu', 'mem', 'ports', 'output', 'sandbox', 'stopped']

/** A finished task's "ended … ago" changes each second for its first minutes, then each minute at most. */
const RECENT_MS = 2 * 60_000
const ALL_AGES_MS = 30_000

const entries = new Map()
const dirty = new Set()
let agesTickedAt = 0
let groups
let countElement
let emptyElement
let matches = () => true
let selectedId = null
let frame = 0

export function createTaskTable({ table, count, empty, onOpen }) {
  groups = createRowGroups(table, (tr) => entries.get(tr.dataset.taskId)?.created ?? 0)
  countElement = count
  emptyElement = empty
  table.addEventListener('click', (event) => {
    // The id cell's link navigates by itself; anywhere else on the row does the same.
    if (event.target.closest('a')) return
    const row = event.target.closest('tr[data-task-id]')
    if (row) onOpen(row.dataset.taskId)
  })
  const changed = (id) => {
    dirty.add(id)
    if (!frame) frame = requestAnimationFrame(flush)
  }
  store.subscribe((_kind, task) => changed(task.id))
  usage.subscribe(changed)
  setInterval(tickAges, 1000)
}

/** predicate(task, haystack): haystack is the lower-cased id, name and command. */
export function setFilter(predicate) {
  matches = predicate
  for (const entry of entries.values()) showIf(entry)
  groups.resize(true)
  updateCount()
}

export function select(id) {
  if (selectedId !== null) entries.get(selectedId)?.tr.classList.remove('selected')
  selectedId = id
  if (id !== null) entries.get(id)?.tr.classList.add('selected')
}

function flush() {
  frame = 0
  const added = []
  for (const id of dirty) {
    const task = store.get(id)
    const entry = entries.get(id)
    if (!task) {
      if (entry) {
        groups.remove(entry.tr)
        entries.delete(id)
      }
    } else if (entry) {
      update(entry, task)
    } else {
      added.push(create(task))
    }
  }
  dirty.clear()
  if (added.length) insert(added)
  groups.resize()
  updateCount()
}

function create(task) {
  const tr = document.createElement('tr')
  tr.dataset.taskId = task.id
  tr.setAttribute('role', 'row')
  const cells = {}
  for (const column of COLUMNS) {
    const td = document.createElement('td')
    td.dataset.col = column
    td.setAttribute('role', 'cell')
    tr.append(td)
    cells[column] = td
  }
  const badge = document.createElement('span')
  badge.className = 'badge'
  // Readiness while it runs, what it waits for while queued.
  const note = document.createElement('span')
  note.className = 'state-note'
  cells.state.append(badge, note)
  // When it ended (or how long it has run) and, once finished, how long it ran.
  const when = document.createElement('span')
  when.className = 'age-when'
  const ran = document.createElement('span')
  ran.className = 'age-ran'
  cells.age.append(when, ran)
  const link = document.createElement('a')
  link.href = `#/tasks/${encodeURIComponent(task.id)}`
  link.textContent = task.id
  link.setAttribute('aria-label', `Open task ${task.id}`)
  cells.id.append(link)
  // Name, command and owner never change over a task's life: written once.
  const command = commandLine(task)
  if (task.name) {
    const name = document.createElement('span')
    name.className = 'task-name'
    name.textContent = visible(task.name)
    cells.command.append(name)
  }
  const line = document.createElement('span')
  line.className = 'task-command'
  line.textContent = command
  cells.command.append(line)
  cells.command.title = task.name ? `${visible(task.name)}\n${command}` : command
  cells.owner.textContent = visible(task.owner)
  cells.owner.title = visible(task.owner)
  const haystack = `${task.id}\n${task.name ?? ''}\n${command}`.toLowerCase()
  const entry = { tr, cells, badge, note, when, ran, task: null, haystack, created: Date.parse(task.createdAt), values: {}, shown: true }
  entries.set(task.id, entry)
  update(entry, task)
  if (task.id === selectedId) tr.classList.add('selected')
  return entry
}

function update(entry, task) {
  entry.task = task
  entry.endedMs = task.endedAt ? Date.parse(task.endedAt) : NaN
  const { cells, values } = entry
  const look = stateLook(task)
  if (values.state !== look.className + look.label) {
    values.state = look.className + look.label
    entry.tr.dataset.state = task.state
    entry.badge.textContent = look.label
    entry.badge.className = look.className
    entry.tr.classList.toggle('failure', isFailure(task))
  }
  showAge(entry, Date.now())
  const times = `${task.startedAt}/${task.endedAt}`
  if (values.times !== times) {
    values.times = times
    const { ran } = taskAge(task, 0)
    cells.age.title = `created ${formatTime(task.createdAt)}${task.startedAt ? `\nstarted ${formatTime(task.startedAt)}` : ''}${task.endedAt ? `\nended ${formatTime(task.endedAt)}` : ''}${ran ? `\n${ran}` : ''}`
  }
  updateAids(entry, task)
  set(entry, 'output', formatBytes(task.outputBytes))
  const outputTitle = `${task.outputBytes} bytes (cap ${formatBytes(task.maxOutputBytes)})`
  if (values.outputTitle !== outputTitle) cells.output.title = values.outputTitle = outputTitle
  // The network mode beside the profile: `off` always has the host's network.
  if (set(entry, 'sandbox', task.sandbox === 'off' ? 'off' : `${task.sandbox} · ${task.network}`)) cells.sandbox.title = entry.values.sandbox
  const stopped = stoppedText(task)
  if (set(entry, 'stopped', stopped)) cells.stopped.title = stopped
  showIf(entry)
}

/** The state's note, CPU, MEM and ports: written, like every cell, only when their text changed. */
function updateAids(entry, task) {
  const { cells, values } = entry
  const note = stateNote(task)
  if (values.note !== note) {
    values.note = note
    entry.note.textContent = note
    entry.note.dataset.kind = task.state === 'queued' ? 'after' : readinessKind(task)
    entry.note.title = task.state === 'queued' && task.after ? `waits for ${task.after.ids.join(', ')}: ${afterText(task.after)}` : note ? readinessText(task) : ''
  }
  const figures = usageCells(task, usage.currentOf(task.id))
  set(entry, 'cpu', figures.cpu)
  set(entry, 'mem', figures.mem)
  const running = task.state === 'running' && figures.cpu !== ''
  const ended = task.usage ? usageText(task.usage) : ''
  const usageTitle = running ? 'CPU now, % of one core' : ended
  if (values.usageTitle !== usageTitle) {
    values.usageTitle = usageTitle
    cells.cpu.title = usageTitle
    cells.mem.title = running ? 'memory in use now' : ended
  }
  const ports = portsKey(task)
  if (values.ports !== ports) {
    values.ports = ports
    renderPorts(cells.ports, task)
  }
}

function set(entry, column, text) {
  if (entry.values[column] === text) return false
  entry.values[column] = text
  entry.cells[column].textContent = text
  return true
}

function showAge(entry, now) {
  const { when, ran } = taskAge(entry.task, now)
  const { values } = entry
  if (values.when !== when) entry.when.textContent = values.when = when
  if (values.ran !== ran) entry.ran.textContent = values.ran = ran
}

function showIf(entry) {
  const shown = matches(entry.task, entry.haystack)
  if (shown !== entry.shown) {
    entry.shown = shown
    entry.tr.hidden = !shown
    groups.touch(entry.tr)
  }
}

// Newest first. Arrival order is creation order, which breaks ties between tasks created in the
// same millisecond.
function insert(added) {
  if (groups.isEmpty()) {
    const sorted = added.reverse().sort((a, b) => b.created - a.created)
    groups.fill(sorted.map((entry) => entry.tr))
    return
  }
  for (const entry of added.sort((a, b) => a.created - b.created)) groups.insert(entry.tr, entry.created)
}

function updateCount() {
  let shown = 0
  for (const entry of entries.values()) if (entry.shown) shown++
  const text = `${shown} of ${entries.size} tasks shown`
  if (countElement.textContent !== text) countElement.textContent = text
  emptyElement.hidden = shown > 0
  const empty = entries.size === 0 ? 'No tasks yet.' : 'No task matches the filters.'
  if (emptyElement.textContent !== empty) emptyElement.textContent = empty
}

function tickAges() {
  if (document.hidden) return
  const now = Date.now()
  const all = now - agesTickedAt >= ALL_AGES_MS
  if (all) agesTickedAt = now
  for (const entry of entries.values()) {
    if (all || isActive(entry.task) || now - entry.endedMs < RECENT_MS) showAge(entry, now)
  }
}
