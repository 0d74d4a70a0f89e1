// One modal <dialog> for every destructive action. Escape and Cancel answer "no": nothing is done
// unless the operator pressed the named button.

let dialog
let textElement
let okButton
let resolvePending = null

export function setupConfirm({ dialog: element, text, ok, cancel }) {
  dialog = element
  textElement = text
  okButton = ok
  ok.addEventListener('click', () => dialog.close('ok'))
  cancel.addEventListener('click', () => dialog.close('cancel'))
  dialog.addEventListener('close', () => {
    const resolve = resolvePending
    resolvePending = null
    resolve?.(dialog.returnValue === 'ok')
  })
}

/**
 * lines: strings shown one per line (task data goes in as text, never as HTML).
 * Resolves true when the operator confirmed.
 */
export function confirmAction({ title, lines, okLabel }) {
  // The modal blocks the page, so a second request can only be a stray one: it is refused.
  if (dialog.open) return Promise.resolve(false)
  textElement.replaceChildren()
  const heading = document.createElement('strong')
  heading.textContent = title
  textElement.append(heading)
  for (const line of lines) {
    const p = document.createElement('p')
    p.textContent = line
    textElement.append(p)
  }
  okButton.textContent = okLabel
  dialog.returnValue = ''
  return new Promise((resolve) => {
    resolvePending = resolve
    dialog.showModal()
    // Cancel has the focus: Enter on a stray keypress must not destroy anything.
    dialog.querySelector('#confirm-cancel').focus()
  })
}
