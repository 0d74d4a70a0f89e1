// Run again: a new task with a finished task's command, cwd and settings (again-request.js),
// after a confirmation that shows what will run.

import { api } from '../shared/api.js'
import { confirmAction } from '../shared/confirm.js'
import { isActive } from '../shared/format.js'
import { againLines, againRequest } from './again-request.js'
import { showNote } from '../shared/messages.js'
import { busy } from '../shared/busy-button.js'
import { isReadOnly, READ_ONLY_REASON } from '../shared/session.js'
import * as store from './task-store.js'

let button
let task = null

export function setupRunAgain(element) {
  button = element
  button.addEventListener('click', () => void runAgain())
}

/** The open task as it is now (null: none, or removed). */
export function runAgainTaskChanged(next) {
  task = next
  if (!button) return
  const reason = !next ? 'No task' : isReadOnly() ? READ_ONLY_REASON : isActive(next) ? 'It has not finished yet' : next.state === 'corrupt' ? 'Its record cannot be read' : null
  button.disabled = reason !== null || button.dataset.busy === 'true'
  button.title = reason ?? 'Start a new task with its command, cwd and settings'
}

async function runAgain() {
  const old = task
  if (!old || button.disabled) return
  const body = againRequest(old)
  const ok = await confirmAction({ title: `Run task ${old.id} again?`, lines: againLines(body, old), okLabel: 'Run again' })
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
