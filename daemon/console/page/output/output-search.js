// Search in the shown output. Matches are wrapped in <mark> inside the text nodes AnsiUp made, so
// its colour spans stay intact; a match across two colours is not found, which is acceptable.

const MAX_MARKS = 10_000
const DEBOUNCE_MS = 150

let output
let countElement
let query = ''
let regex = null
let currentMark = null
let onJump = () => {}

export function setupOutputSearch({ input, count, output: element, jumped }) {
  output = element
  countElement = count
  onJump = jumped
  let timer = 0
  input.addEventListener('input', () => {
    clearTimeout(timer)
    timer = setTimeout(() => search(input.value), DEBOUNCE_MS)
  })
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter') {
      event.preventDefault()
      clearTimeout(timer)
      if (query !== input.value) search(input.value)
      jump(event.shiftKey ? -1 : 1)
    } else if (event.key === 'Escape' && input.value) {
      input.value = ''
      search('')
    }
  })
}

function escape(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

function search(text) {
  unmark(output)
  query = text
  currentMark = null
  regex = text ? new RegExp(escape(text), 'gi') : null
  if (regex) markIn(output)
  updateCount()
}

/** New output shown: its matches are marked too. */
export function markNew(element) {
  if (regex) markIn(element)
  updateCount()
}

/** Output replaced or trimmed: the count follows what is still shown. */
export function updateCount() {
  if (!regex) {
    countElement.textContent = ''
    return
  }
  const total = output.getElementsByTagName('mark').length
  const more = total >= MAX_MARKS ? '+' : ''
  const index = currentMark?.isConnected ? Array.prototype.indexOf.call(output.getElementsByTagName('mark'), currentMark) : -1
  countElement.textContent = index >= 0 ? `${index + 1} of ${total}${more} matches` : `${total}${more} matches`
}

function unmark(root) {
  const parents = new Set()
  for (const mark of [...root.getElementsByTagName('mark')]) {
    parents.add(mark.parentNode)
    mark.replaceWith(...mark.childNodes)
  }
  for (const parent of parents) parent.normalize()
}

function markIn(root) {
  let marks = output.getElementsByTagName('mark').length
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT)
  const nodes = []
  while (walker.nextNode()) nodes.push(walker.currentNode)
  for (const node of nodes) {
    if (marks >= MAX_MARKS) return
    const text = node.data
    regex.lastIndex = 0
    let match = regex.exec(text)
    if (!match) continue
    const fragment = document.createDocumentFragment()
    let last = 0
    while (match && marks < MAX_MARKS) {
      if (match.index > last) fragment.append(text.slice(last, match.index))
      const mark = document.createElement('mark')
      mark.textContent = match[0]
      fragment.append(mark)
      marks++
      last = match.index + match[0].length
      match = regex.exec(text)
    }
    if (last < text.length) fragment.append(text.slice(last))
    node.replaceWith(fragment)
  }
}

function jump(step) {
  const marks = output.getElementsByTagName('mark')
  if (marks.length === 0) return updateCount()
  // The current match is held as an element: trimming old output shifts every index.
  const index = currentMark?.isConnected ? Array.prototype.indexOf.call(marks, currentMark) : -1
  currentMark?.classList.remove('current')
  const next = index < 0 ? (step > 0 ? 0 : marks.length - 1) : (index + step + marks.length) % marks.length
  const mark = marks[next]
  currentMark = mark
  mark.classList.add('current')
  // Following would scroll the match away at the next line of output.
  onJump()
  mark.scrollIntoView({ block: 'center' })
  updateCount()
}

/** A fresh task: no match is current any more. */
export function resetSearch() {
  currentMark = null
  updateCount()
}
