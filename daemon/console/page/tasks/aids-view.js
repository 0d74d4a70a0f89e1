// The open task's readiness, ports, dependencies and use: the fields of task-view.js that hold
// links or follow the live figures, and the chart of its CPU and memory.

import * as store from './task-store.js'
import * as usage from './usage-history.js'
import { portsKey, renderPorts } from './port-links.js'
import { createUsageChart } from './usage-chart.js'
import { formatBytes, isActive, isTaskId, stoppedText } from '../shared/format.js'
import { afterText, formatCpuPercent, readinessKind, readinessText, usageText } from '../shared/aids-format.js'

let fields
let chartSection
let chart = null
let current = null
let shown = {}

export function setupAidsView(elements) {
  fields = elements.fields
  chartSection = elements.chartSection
  chart = createUsageChart(elements.chart)
  usage.subscribe((id) => {
    if (id === current?.id) showLive(current)
  })
  // What a dependency ended as shows beside it: a change to one redraws the list.
  store.subscribe((_kind, task) => {
    if (current?.after?.ids?.includes(task.id)) showAfter(current)
  })
}

export function openAids(task) {
  current = task
  shown = {}
  showAids(task)
}

const FIELD_NAMES = ['ready', 'port', 'ports', 'after', 'cpu', 'memory', 'usage']

export function closeAids() {
  current = null
  shown = {}
  for (const name of FIELD_NAMES) setText(name, '…')
  chartSection.hidden = true
  chart.show([])
}

/** Every field from the record; the ports and dependency links are rebuilt only when they changed. */
export function showAids(task) {
  current = task
  setText('ready', readinessText(task))
  fields.ready.dataset.kind = readinessKind(task)
  setText('port', task.port ? String(task.port) : '—')
  const ports = portsKey(task)
  if (shown.ports !== ports) {
    shown.ports = ports
    renderPorts(fields.ports, task, { empty: task.state === 'running' ? 'none seen' : '—' })
  }
  showAfter(task)
  setText('usage', task.usage ? usageText(task.usage) : isActive(task) ? 'once it ends' : '—')
  showLive(task)
}

function showLive(task) {
  const samples = usage.samplesOf(task.id)
  const now = usage.currentOf(task.id)
  const running = task.state === 'running'
  setText('cpu', now ? `${formatCpuPercent(now.cpu)} of a core` : running ? '…' : '—')
  setText('memory', now ? formatBytes(now.mem) : running ? '…' : '—')
  chartSection.hidden = samples.length === 0
  chart.show(samples)
}

function showAfter(task) {
  const ids = task.after?.ids ?? []
  const key = ids.map((id) => `${id}:${dependencyState(id)}`).join(',')
  if (shown.after === key) return
  shown.after = key
  const target = fields.after
  target.replaceChildren()
  if (ids.length === 0) {
    target.textContent = '—'
    return
  }
  ids.forEach((id, index) => {
    if (index > 0) target.append(', ')
    // An id is the daemon's, but a link is still made only of one that looks like an id.
    const item = document.createElement(isTaskId(id) ? 'a' : 'span')
    item.textContent = id
    item.className = 'mono'
    if (item.tagName === 'A') item.href = `#/tasks/${encodeURIComponent(id)}`
    target.append(item)
    const state = dependencyState(id)
    if (state) target.append(` (${state})`)
  })
  target.append(` · ${afterText(task.after)}`)
}

/** What a dependency is now, as the page knows it: `running`, `exited 0`, `killed · SIGTERM` … */
function dependencyState(id) {
  const task = store.get(id)
  if (!task) return 'not listed'
  if (isActive(task)) return task.state
  const why = stoppedText(task)
  return task.state === 'exited' ? `exited ${task.exitCode}` : why ? `${task.state} · ${why}` : task.state
}

function setText(name, text) {
  const target = fields[name]
  if (target && target.textContent !== text) target.textContent = text
}
