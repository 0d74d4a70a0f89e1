// Wiring: finds the page's elements, starts each part, and routes #/tasks/<id> to the task view
// (a hash route, so that a task's view can be linked and the back button closes it).

import { isSessionEnded, onSessionEnded } from './shared/api.js'
import { setupConfirm } from './shared/confirm.js'
import { setupMessages, showError, showSessionEnded } from './shared/messages.js'
import { createTaskTable } from './tasks/task-table.js'
import { createFilters, showFailures } from './tasks/filters.js'
import { setupColumnResize } from './tasks/column-resize.js'
import { setupHeader } from './header/header.js'
import { startLiveSync } from './tasks/live-sync.js'
import { setupOutputView } from './output/output-view.js'
import { setupOutputSearch } from './output/output-search.js'
import { closeTask, openTask, setupTaskView } from './tasks/task-view.js'
import { setupNetworkView } from './tasks/network-view.js'
import { setupAidsView } from './tasks/aids-view.js'
import { setupInputBox } from './output/input-box.js'
import { setupRunAgain } from './tasks/run-again.js'

const $ = (selector) => {
  const found = document.querySelector(selector)
  if (!found) throw new Error(`the page has no ${selector}`)
  return found
}

function fieldsOf(container) {
  const fields = {}
  for (const element of container.querySelectorAll('[data-field]')) fields[element.dataset.field] = element
  return fields
}

function route() {
  const match = /^#\/tasks\/([^/]+)$/.exec(location.hash)
  if (match) void openTask(decodeURIComponent(match[1]))
  else closeTask()
}

function main() {
  const connection = $('#connection')
  const setConnection = (text) => {
    // Once the session is over, a late "reconnecting" from a loop winding down must not hide it.
    if (isSessionEnded() && text !== 'session ended') return
    connection.textContent = text
    connection.dataset.state = text.replace(' ', '-')
  }
  setupMessages({ message: $('#message'), text: $('#message-text'), dismiss: $('#message-dismiss') })
  setupConfirm({ dialog: $('#confirm'), text: $('#confirm-text'), ok: $('#confirm-ok'), cancel: $('#confirm-cancel') })
  onSessionEnded(() => {
    setConnection('session ended')
    showSessionEnded()
    document.body.classList.add('session-ended')
    closeTask()
  })

  createTaskTable({
    table: $('#tasks'),
    count: $('#shown-count'),
    empty: $('#tasks-empty'),
    onOpen: (id) => {
      location.hash = `#/tasks/${encodeURIComponent(id)}`
    },
  })
  setupColumnResize($('#tasks'))
  createFilters({ owner: $('#filter-owner'), state: $('#filter-state'), search: $('#search') })
  setupHeader({
    version: $('#daemon-version'),
    spoolUse: $('#spool-use'),
    spoolChart: $('#spool-chart'),
    sandbox: $('#sandbox-capability'),
    concurrency: $('#concurrency'),
    gcButton: $('#gc-button'),
    failureCount: $('#failure-count'),
    onShowFailures: () => showFailures($('#filter-state')),
  })

  const output = $('#output')
  const follow = $('#follow')
  setupOutputView({ output, follow, range: $('#output-range'), status: $('#output-status'), earlier: $('#output-earlier'), download: $('#download'), terminal: $('#terminal') })
  setupInputBox({ box: $('#input-box'), line: $('#input-line'), send: $('#input-send'), ctrlC: $('#input-ctrl-c'), ctrlD: $('#input-ctrl-d'), note: $('#input-note') })
  setupRunAgain($('#run-again-button'))
  setupOutputSearch({
    input: $('#output-search'),
    count: $('#output-search-count'),
    output,
    jumped: () => {
      if (!follow.checked) return
      follow.checked = false
      follow.dispatchEvent(new Event('change'))
    },
  })
  const view = $('#task-view')
  setupTaskView({
    view,
    title: $('#task-title'),
    fields: fieldsOf(view),
    close: $('#close-task'),
    kill: $('#kill-button'),
    remove: $('#remove-button'),
    signal: $('#kill-signal'),
    grace: $('#kill-grace'),
  })
  setupAidsView({ fields: fieldsOf(view), chartSection: $('#usage'), chart: $('#usage-chart') })
  setupNetworkView({ section: $('#network'), summary: $('#network-summary'), note: $('#network-note'), table: $('#network-log'), rows: $('#network-log tbody') })

  document.addEventListener('keydown', (event) => {
    // Escape closes the task view, unless it was meant for a field or the dialog.
    if (event.key !== 'Escape' || event.defaultPrevented || $('#confirm').open) return
    if (event.target.closest?.('input, select, textarea')) return
    if (!view.hidden) location.hash = '#/'
  })
  window.addEventListener('hashchange', route)
  startLiveSync({ onConnection: setConnection, onError: (error) => showError(error, 'Loading the tasks') })
  route()
}

try {
  main()
} catch (error) {
  // Without this, a broken page would only say so in the developer console.
  document.body.prepend(Object.assign(document.createElement('p'), { className: 'fatal', textContent: `The console page failed to start: ${error.message}` }))
  throw error
}
