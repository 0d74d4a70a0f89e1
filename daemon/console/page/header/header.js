// The header: what the daemon is and can do (from /v1/status every 5 s), how busy it is (from the
// task store, live), and the gc button (disabled, with the reason, in a read-only or ended session).

import { api, onSessionEnded, SessionEndedError } from '../shared/api.js'
import * as store from '../tasks/task-store.js'
import { formatBytes, formatPercent, formatTime, isActive, isFailure } from '../shared/format.js'
import { createSpoolChart } from './spool-chart.js'
import { confirmAction } from '../shared/confirm.js'
import { showNote } from '../shared/messages.js'
import { busy } from '../shared/busy-button.js'
import { isReadOnly, READ_ONLY_REASON, sessionKnown } from '../shared/session.js'
import { forgetTasks } from '../tasks/live-sync.js'

const STATUS_MS = 5000

let elements
let status = null
let chart
let failures = 0
let sessionEnded = false

export function setupHeader(found) {
  elements = found
  chart = createSpoolChart(elements.spoolChart)
  elements.gcButton.addEventListener('click', () => void collectGarbage())
  elements.failureCount.addEventListener('click', elements.onShowFailures)
  let frame = 0
  store.subscribe((kind, task, previous) => {
    // Counted as the store changes, so that thousands of tasks are never walked again.
    if (previous && isFailure(previous)) failures--
    if (kind === 'upsert' && isFailure(task)) failures++
    frame ||= requestAnimationFrame(() => {
      frame = 0
      showConcurrency()
      showFailureCount()
    })
  })
  void pollStatus()
  const timer = setInterval(pollStatus, STATUS_MS)
  onSessionEnded(() => {
    clearInterval(timer)
    sessionEnded = true
    showGcButton()
  })
  void sessionKnown.then(showGcButton)
}

/** The gc button as things are now: a read-only session may not remove, nor may an ended one. */
function showGcButton() {
  const button = elements.gcButton
  button.disabled = sessionEnded || isReadOnly() || button.dataset.busy === 'true'
  button.title = isReadOnly() ? READ_ONLY_REASON : ''
}

async function pollStatus() {
  try {
    status = await api('/v1/status')
  } catch (error) {
    if (!(error instanceof SessionEndedError)) elements.spoolUse.title = `not refreshed: ${error.message}`
    return
  }
  elements.version.textContent = status.version
  elements.version.title = `pid ${status.pid}, started ${formatTime(status.startedAt)}\nhome ${status.home}\nspawner ${status.spawner}`
  const { usedBytes, quotaBytes, path } = status.spool
  elements.spoolUse.textContent = `${formatBytes(usedBytes)} of ${formatBytes(quotaBytes)} (${formatPercent(usedBytes, quotaBytes)})`
  elements.spoolUse.title = `${usedBytes} of ${quotaBytes} bytes in ${path}`
  chart.add(usedBytes)
  showSandbox(status.sandbox)
  showConcurrency()
}

function showSandbox(sandbox) {
  const parts = [`default ${sandbox.default}`, `profiles ${sandbox.profiles.join(', ') || 'none'}`]
  parts.push(sandbox.bubblewrap ? `bubblewrap ${sandbox.bubblewrap.version}` : 'no bubblewrap')
  const missing = Object.entries(sandbox.missing ?? {})
  const text = parts.join(' · ')
  const target = elements.sandbox
  target.replaceChildren(text)
  for (const [profile, why] of missing) {
    const item = document.createElement('span')
    item.className = 'missing'
    item.textContent = ` · ${profile} missing: ${why}`
    target.append(item)
  }
  const features = [
    `user namespaces ${sandbox.userNamespaces ? 'yes' : 'no'}`,
    `cgroups memory ${sandbox.cgroups?.memory ? 'yes' : 'no'}, pids ${sandbox.cgroups?.pids ? 'yes' : 'no'}`,
    `seccomp ${sandbox.seccomp ? 'yes' : 'no'}`,
  ]
  if (sandbox.bubblewrap) features.unshift(`bubblewrap ${sandbox.bubblewrap.version} at ${sandbox.bubblewrap.path}`)
  target.title = features.join('\n')
}

function showConcurrency() {
  if (!status) return
  const text = `${status.concurrency} at once, ${status.perOwnerConcurrency} per owner · ${store.countOf('running')} running, ${store.countOf('queued')} queued`
  if (elements.concurrency.textContent !== text) elements.concurrency.textContent = text
}

function showFailureCount() {
  const text = `${failures} failed`
  if (elements.failureCount.textContent === text) return
  elements.failureCount.textContent = text
  elements.failureCount.dataset.count = String(failures)
}

async function collectGarbage() {
  let count = 0
  let bytes = 0
  for (const task of store.all()) {
    if (isActive(task)) continue
    count++
    bytes += task.outputBytes
  }
  if (count === 0) {
    showNote('No finished task to remove.')
    return
  }
  const ok = await confirmAction({
    title: `Remove ${count} finished task${count === 1 ? '' : 's'}?`,
    lines: [`Their records and output (about ${formatBytes(bytes)}) are deleted from the spool. Running and queued tasks are kept.`],
    okLabel: 'Remove finished tasks',
  })
  if (!ok) return
  // Deleting a large spool takes a while: the button says it is at work.
  await busy(
    elements.gcButton,
    'Removing…',
    async () => {
      // Explicitly 0: without an age the daemon keeps what ended in the last day, not what was confirmed.
      const result = await api('/v1/gc', { method: 'POST', body: { olderThanMs: 0 } })
      forgetTasks(result.removed)
      showNote(`Removed ${result.removed.length} task${result.removed.length === 1 ? '' : 's'}, freed ${formatBytes(result.freedBytes)}.`)
      void pollStatus()
    },
    'Remove finished tasks',
    showGcButton,
  )
}
