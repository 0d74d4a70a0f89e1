// A button whose action takes a while: disabled, its label saying what is being done, until the
// action ends; an error is shown with its context. `after` then sets the button as things are now.

import { showError } from './messages.js'

export async function busy(button, label, action, context, after) {
  const text = button.textContent
  button.dataset.busy = 'true'
  button.disabled = true
  button.textContent = label
  try {
    await action()
  } catch (error) {
    showError(error, context)
  } finally {
    button.dataset.busy = 'false'
    button.textContent = text
    after()
  }
}
