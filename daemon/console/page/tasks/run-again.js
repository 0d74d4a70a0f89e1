// Run again: a new task with a finished task's command, cwd and settings, after a confirmation
// that shows what will run. Its environment's values are never stored (only their names), so they
// cannot be replayed; nor can the tasks it waited for, which have ended.

import { api } from '../shared/api.js'
import { confirmAction } from '../shared/confirm.js'
import { formatBytes, formatDuration, isActive, quotedCommand, visible } from '../shared/format.js'
import { showNote } from '../shared/messages.js'
import { busy } from '../shared/busy-button.js'
import { isReadOnly, READ_ONLY_REASON, sessionKnown } from '../shared/session.js'
import * as store from './task-store.js'

const NAME_MAX = 200
const SUFFIX = ' (again)'

let button
let task = null

export function setupRunAgain(element) {
  button = element
  button.addEventListener('click', () => void runAgain())
  void sessionKnown.then(() => runAgainTaskChanged(task))
}

/** The open task as it is now (null: none, or removed). */
export function runAgainTaskChanged(next) {
  task = next
  if (!button) return
  const reason = !next ? 'No task' : isReadOnly() ? READ_ONLY_REASON : isActive(next) ? 'It has not finished yet' : next.state === 'corrupt' ? 'Its record cannot be read' : null
  button.disabled = reason !== null || button.dataset.busy === 'true'
  button.title = reason ?? 'Start a new task with its command, cwd and settings'
}

/** The request that starts it again: what its record keeps of the one that started it. */
export function againRequest(task) {
  const body = {
    command: task.shell ? [task.command[2]] : task.command,
    shell: task.shell,
    cwd: task.cwd,
    owner: task.owner,
    sandbox: task.sandbox,
    network: task.network,
    lifetime: task.lifetime,
    maxOutputBytes: task.maxOutputBytes,
  }
  if (task.name) body.name = `${task.name.slice(0, NAME_MAX - SUFFIX.length)}${SUFFIX}`
  if (task.allowNet?.length) body.allowNet = task.allowNet
  if (task.writablePaths?.length) body.writablePaths = task.writablePaths
  if (task.timeoutMs) body.timeoutMs = task.timeoutMs
  if (task.memoryBytes) body.memoryBytes = task.memoryBytes
  if (task.pidsMax) body.pidsMax = task.pidsMax
  if (task.stdin === 'pipe' || task.stdin === 'closed') body.stdin = 'pipe'
  if (task.tty) body.tty = { cols: task.tty.cols, rows: task.tty.rows }
  if (task.readyWhen) body.ready = task.readyWhen
  if (task.portAuto) body.port = 'auto'
  else if (task.port) body.port = task.port
  return body
}

function describe(body, task) {
  const lines = [
    `Command: ${quotedCommand(task)}${body.shell ? ' (a shell line, sh -c)' : ''}`,
    `Cwd: ${visible(body.cwd)}`,
    `Owner ${visible(body.owner)}, lifetime ${body.lifetime}; sandbox ${body.sandbox}, network ${body.network}` +
      `${body.allowNet ? ` (also ${body.allowNet.map(visible).join(', ')})` : ''}`,
  ]
  const limits = [
    body.timeoutMs && `time limit ${formatDuration(body.timeoutMs)}`,
    body.memoryBytes && `memory ${formatBytes(body.memoryBytes)}`,
    body.pidsMax && `${body.pidsMax} processes`,
    `output cap ${formatBytes(body.maxOutputBytes)}`,
  ].filter(Boolean)
  lines.push(`Limits: ${limits.join(', ')}`)
  if (body.writablePaths) lines.push(`Also writable: ${body.writablePaths.map(visible).join(', ')}`)
  if (body.tty) lines.push(`On a terminal, ${body.tty.cols}×${body.tty.rows}`)
  else if (body.stdin) lines.push('Its stdin a pipe (for the input box)')
  if (body.name) lines.push(`Name: ${visible(body.name)}`)
  if (task.envKeys?.length) {
    lines.push(`Not replayed: its environment variables ${task.envKeys.map(visible).join(', ')} (their values are never stored).`)
  }
  if (task.after?.length) lines.push(`Not replayed: waiting for ${task.after.join(', ')} (those have ended).`)
  return lines
}

async function runAgain() {
  const old = task
  if (!old || button.disabled) return
  const body = againRequest(old)
  const ok = await confirmAction({ title: `Run task ${old.id} again?`, lines: describe(body, old), okLabel: 'Run again' })
  if (!ok) return
  await busy(
    button,
    'Starting…',
    async () => {
      const started = await api('/v1/tasks', { method: 'POST', body })
      store.upsert(started)
      showNote(`Started task ${started.id}, again as ${old.id}.`)
      location.hash = `#/tasks/${encodeURIComponent(started.id)}`
    },
    `Running task ${old.id} again`,
    () => runAgainTaskChanged(task),
  )
}
