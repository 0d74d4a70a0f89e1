// The input box of a running task that takes input (started with --stdin or --tty): a line (with
// its newline), Ctrl-C and Ctrl-D, by its buttons or the keys in the box, through the input route
// `tend send` uses. A pipe carries no signal: Ctrl-C is a terminal's (Kill sends SIGINT to a pipe's task).

import { api, taskPath } from '../shared/api.js'
import { showError } from '../shared/messages.js'
import { isReadOnly, READ_ONLY_REASON } from '../shared/session.js'

const CTRL_C = '\u0003'

let el
let task = null
/** Inputs go one after another, in the order typed. */
let queue = Promise.resolve()

export function setupInputBox(elements) {
  el = elements
  el.send.addEventListener('click', () => sendLine())
  el.ctrlC.addEventListener('click', sendCtrlC)
  el.ctrlD.addEventListener('click', sendCtrlD)
  el.line.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.isComposing) {
      event.preventDefault()
      sendLine()
    } else if (event.ctrlKey && !event.altKey && !event.metaKey && (event.key === 'c' || event.key === 'd')) {
      // Ctrl-C over a selection in the box is a copy, as anywhere.
      if (event.key === 'c' && (el.line.selectionStart !== el.line.selectionEnd || !task?.tty)) return
      event.preventDefault()
      if (event.key === 'c') sendCtrlC()
      else sendCtrlD()
    }
  })
}

/** Whether a task reads what is sent to it now. */
function takesInput(task) {
  return task.state === 'running' && (Boolean(task.tty) || task.stdin === 'pipe')
}

/** The open task, as it is now (null: none, or removed). */
export function inputTaskChanged(next) {
  const changed = next?.id !== task?.id
  task = next
  const shown = Boolean(next && takesInput(next))
  el.box.hidden = !shown
  if (!shown) return
  if (changed) el.line.value = ''
  const readOnly = isReadOnly()
  for (const control of [el.line, el.send, el.ctrlD]) control.disabled = readOnly
  el.ctrlC.disabled = readOnly || !next.tty
  el.ctrlC.title = next.tty ? 'Type Ctrl-C into its terminal (SIGINT to its foreground programs)' : 'A pipe carries no Ctrl-C: Kill with SIGINT instead'
  el.ctrlD.title = next.tty ? 'Type Ctrl-D (end of input) into its terminal' : 'Close its stdin: it reads end-of-file'
  el.note.textContent = readOnly ? READ_ONLY_REASON : next.tty ? 'to its terminal' : 'to its stdin'
}

function sendCtrlC() {
  sendInput({ text: CTRL_C }, 'Ctrl-C')
}

function sendCtrlD() {
  sendInput({ eof: true }, 'Ctrl-D')
}

function sendLine() {
  if (el.send.disabled) return
  const text = `${el.line.value}\n`
  el.line.value = ''
  sendInput({ text }, 'Sending a line', () => {
    // Not lost: the operator can send it again.
    if (el.line.value === '') el.line.value = text.slice(0, -1)
  })
}

/** Sends one input to the open task, after those before it. */
export function sendInput(body, context, onFail) {
  if (!task || isReadOnly()) return
  const id = task.id
  queue = queue.then(async () => {
    try {
      await api(taskPath(id, '/input'), { method: 'POST', body })
    } catch (error) {
      onFail?.()
      showError(error, `${context} to task ${id}`)
    }
  })
}
