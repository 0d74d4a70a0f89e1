// Column widths the operator sets: drag a header cell's right edge, or focus it and press the
// arrow keys. Every row's grid reads the widths from --w-<column> on the table (style.css), so a
// change is one property, not a style per row. Kept for the browser tab's session.

const STORAGE_KEY = 'tend.console.columnWidths'
const MIN_PX = 40
const MAX_PX = 1200
const KEY_STEP_PX = 16

/** The command column takes what is left: every other column can be resized. */
const FLEXIBLE = new Set(['command'])

export function setupColumnResize(table) {
  const widths = load()
  for (const [column, px] of Object.entries(widths)) apply(table, column, px)
  for (const th of table.tHead.rows[0].cells) {
    const column = [...th.classList].find((name) => name.startsWith('col-'))?.slice(4)
    if (!column || FLEXIBLE.has(column)) continue
    th.append(createHandle(table, th, column, widths))
  }
}

function createHandle(table, th, column, widths) {
  const handle = document.createElement('span')
  handle.className = 'col-resize'
  handle.dataset.col = column
  handle.tabIndex = 0
  handle.setAttribute('role', 'separator')
  handle.setAttribute('aria-orientation', 'vertical')
  handle.setAttribute('aria-label', `Resize the ${th.textContent.trim().toLowerCase()} column (arrow keys)`)
  handle.title = 'Drag to resize; or focus and use ← →'
  const set = (px) => {
    widths[column] = clamp(px)
    apply(table, column, widths[column])
    handle.setAttribute('aria-valuenow', String(widths[column]))
  }
  handle.addEventListener('pointerdown', (event) => {
    if (event.button !== 0) return
    event.preventDefault()
    const startX = event.clientX
    const startWidth = th.getBoundingClientRect().width
    handle.setPointerCapture(event.pointerId)
    handle.classList.add('dragging')
    table.classList.add('resizing')
    const move = (moved) => set(startWidth + moved.clientX - startX)
    const end = () => {
      handle.removeEventListener('pointermove', move)
      handle.classList.remove('dragging')
      table.classList.remove('resizing')
      save(widths)
    }
    handle.addEventListener('pointermove', move)
    handle.addEventListener('pointerup', end, { once: true })
    handle.addEventListener('pointercancel', end, { once: true })
  })
  // A click on the edge must not sort or open anything beneath it.
  handle.addEventListener('click', (event) => event.stopPropagation())
  handle.addEventListener('keydown', (event) => {
    if (event.key !== 'ArrowLeft' && event.key !== 'ArrowRight') return
    event.preventDefault()
    const step = (event.shiftKey ? 4 : 1) * KEY_STEP_PX * (event.key === 'ArrowLeft' ? -1 : 1)
    set(th.getBoundingClientRect().width + step)
    save(widths)
  })
  return handle
}

function clamp(px) {
  return Math.round(Math.min(MAX_PX, Math.max(MIN_PX, px)))
}

function apply(table, column, px) {
  table.style.setProperty(`--w-${column}`, `${px}px`)
}

function load() {
  try {
    const stored = JSON.parse(sessionStorage.getItem(STORAGE_KEY) ?? '{}')
    const widths = {}
    // Stored by this page, but read as any input: only column names and numbers in range.
    for (const [column, px] of Object.entries(stored)) if (/^[a-z]+$/.test(column) && Number.isFinite(px)) widths[column] = clamp(px)
    return widths
  } catch {
    return {}
  }
}

function save(widths) {
  try {
    sessionStorage.setItem(STORAGE_KEY, JSON.stringify(widths))
  } catch {
    // Storage refused (a private window's quota): the widths last as long as the page.
  }
}
