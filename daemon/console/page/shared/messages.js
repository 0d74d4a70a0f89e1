// The message area under the header: outcomes of actions and the daemon's error messages.
// Errors stay until dismissed (an operator may look away); notes fade after a while.

import { isSessionEnded } from './api.js'

const NOTE_MS = 8000

let box
let textElement
let timer = 0

export function setupMessages({ message, text, dismiss }) {
  box = message
  textElement = text
  dismiss.addEventListener('click', () => {
    // The end of the session stays on screen: nothing on the page works any more.
    if (!isSessionEnded()) hide()
  })
}

function show(text, kind) {
  clearTimeout(timer)
  textElement.textContent = text
  box.dataset.kind = kind
  box.hidden = false
  if (kind === 'note') timer = setTimeout(hide, NOTE_MS)
}

function hide() {
  box.hidden = true
  textElement.textContent = ''
}

export function showNote(text) {
  if (!isSessionEnded()) show(text, 'note')
}

/** error: an ApiError (its message is the daemon's), any Error, or a string. */
export function showError(error, context = '') {
  if (isSessionEnded()) return
  const text = typeof error === 'string' ? error : error?.message || String(error)
  show(context ? `${context}: ${text}` : text, 'error')
}

export function showSessionEnded() {
  clearTimeout(timer)
  show('Session ended: open the URL that `tend console` prints', 'ended')
}
