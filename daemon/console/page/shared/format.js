// Turning task data into short text for people. Everything here returns plain strings that the
// callers put in textContent: nothing builds HTML.

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB']

export function formatBytes(bytes) {
  if (!Number.isFinite(bytes)) return '?'
  let value = bytes
  let unit = 0
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024
    unit++
  }
  if (unit === 0) return `${value} B`
  // Whole numbers read better at a glance once they are past two digits.
  const digits = value >= 100 ? 0 : value >= 10 ? 1 : 2
  return `${Number(value.toFixed(digits))} ${UNITS[unit]}`
}

export function formatPercent(part, whole) {
  if (!whole) return '?%'
  const percent = (part / whole) * 100
  // Tiny use must not read as 0%: the operator wants to see that the spool is not empty.
  const digits = percent >= 10 ? 1 : percent >= 0.01 || percent === 0 ? 2 : 4
  return `${Number(percent.toFixed(digits))}%`
}

/** `3s`, `4m 05s`, `2h 03m`, `3d 04h`: two units at most, since the column is narrow. */
export function formatDuration(ms) {
  if (!Number.isFinite(ms) || ms < 0) ms = 0
  const seconds = Math.floor(ms / 1000)
  if (seconds < 60) return `${seconds}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 60) return `${minutes}m ${pad(seconds % 60)}s`
  const hours = Math.floor(minutes / 60)
  if (hours < 24) return `${hours}h ${pad(minutes % 60)}m`
  return `${Math.floor(hours / 24)}d ${pad(hours % 24)}h`
}

function pad(n) {
  return String(n).padStart(2, '0')
}

// One formatter for the page: making one per call (toLocaleString) is slow enough to show with
// thousands of rows.
const TIME_FORMAT = new Intl.DateTimeFormat(undefined, { dateStyle: 'short', timeStyle: 'medium' })

export function formatTime(iso) {
  if (!iso) return '—'
  const date = new Date(iso)
  if (Number.isNaN(date.getTime())) return iso
  return TIME_FORMAT.format(date)
}

const TASK_ID = /^[A-Za-z0-9_-]{1,64}$/

/** Whether text has a task id's shape: only such text goes into a #/tasks/ link. */
export function isTaskId(text) {
  return typeof text === 'string' && TASK_ID.test(text)
}

const ACTIVE = new Set(['queued', 'running'])

export function isActive(task) {
  return ACTIVE.has(task.state)
}

const FAILURE_STATES = new Set(['killed', 'timed_out', 'failed', 'lost'])

/** A task that ended badly: a non-zero exit, a kill, a timeout, a failed start or a lost keeper. */
export function isFailure(task) {
  if (task.state === 'exited') return task.exitCode !== 0 && task.exitCode !== null && task.exitCode !== undefined
  return FAILURE_STATES.has(task.state)
}

/** A state pill's text and classes: a non-zero exit has a pill of its own, every failure is marked. */
export function stateLook(task) {
  const failure = isFailure(task)
  const nonZero = task.state === 'exited' && failure
  const label = nonZero ? `exited ${task.exitCode}` : task.state
  const className = `badge state-${nonZero ? 'exited-nonzero' : task.state}${failure ? ' failure' : ''}`
  return { label, className }
}

/** `0.4 s`, `12 s`, `4m 05s`: tenths where a run is short enough for them to matter. */
export function formatRunTime(ms) {
  if (Number.isFinite(ms) && ms >= 0 && ms < 10_000) return `${(Math.floor(ms / 100) / 10).toFixed(1)} s`
  if (Number.isFinite(ms) && ms < 60_000) return `${Math.floor(ms / 1000)} s`
  return formatDuration(ms)
}

/** `just now`, `12 s ago`, `3 min ago`, `2 h ago`, `4 d ago`: one unit, it only has to place the moment. */
export function formatAgo(ms) {
  const seconds = Math.floor(Math.max(0, ms) / 1000)
  if (seconds < 5) return 'just now'
  if (seconds < 60) return `${seconds} s ago`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 60) return `${minutes} min ago`
  const hours = Math.floor(minutes / 60)
  if (hours < 48) return `${hours} h ago`
  return `${Math.floor(hours / 24)} d ago`
}

/** `2 min`, `1 h 05 min`: a running task's time so far, one or two units. */
function formatSince(ms) {
  const seconds = Math.floor(Math.max(0, ms) / 1000)
  if (seconds < 60) return `${seconds} s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 60) return `${minutes} min`
  const hours = Math.floor(minutes / 60)
  if (hours < 48) return `${hours} h ${pad(minutes % 60)} min`
  return `${Math.floor(hours / 24)} d ${pad(hours % 24)} h`
}

/**
 * The age column: `running 2 min` (since it started), `queued 40 s`, or, once finished, when it
 * ended (`ended 3 min ago`) and how long it ran (`ran 1.2 s`) apart, for two spans of the cell.
 */
export function taskAge(task, now) {
  if (task.state === 'running') return { when: `running ${formatSince(now - Date.parse(task.startedAt ?? task.createdAt))}`, ran: '' }
  if (task.state === 'queued') return { when: `queued ${formatSince(now - Date.parse(task.createdAt))}`, ran: '' }
  const ended = task.endedAt ? `ended ${formatAgo(now - Date.parse(task.endedAt))}` : '—'
  const ran = task.startedAt && task.endedAt ? `ran ${formatRunTime(Date.parse(task.endedAt) - Date.parse(task.startedAt))}` : ''
  return { when: ended, ran }
}

// Task commands are written by agents and may be hostile: control characters could fake line
// breaks or erase text, and bidirectional overrides could make a command read as another one.
// They are shown as visible symbols instead.
const HIDDEN_CHARACTERS = /[\u0000-\u0008\u000b-\u001f\u007f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g

export function visible(text) {
  return String(text).replace(HIDDEN_CHARACTERS, (ch) => {
    const code = ch.charCodeAt(0)
    if (code < 0x20) return String.fromCharCode(0x2400 + code)
    if (code === 0x7f) return '\u2421'
    return `<U+${code.toString(16).toUpperCase()}>`
  })
}

/** A shell task's line (its command is `sh -c LINE`); null for any other task. */
export function shellLine(task) {
  return task.shell && Array.isArray(task.command) && task.command.length === 3 ? task.command[2] : null
}

/**
 * The table's command text: the shell line for shell tasks, else the argv joined with spaces. A
 * line break shows as ␤: in a one-line cell it would pass for a space, hiding a second command.
 */
export function commandLine(task) {
  const text = shellLine(task) ?? (Array.isArray(task.command) ? task.command : []).join(' ')
  return visible(text).replace(/\n/g, '\u2424')
}

const SAFE_WORD = /^[A-Za-z0-9_@%+=:,./-]+$/

/** The argv as a shell would need it typed: exact where joining with spaces is ambiguous. */
export function quotedCommand(task) {
  const line = shellLine(task)
  if (line !== null) return visible(line)
  const command = Array.isArray(task.command) ? task.command : []
  return visible(command.map((word) => (SAFE_WORD.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`)).join(' '))
}

/** Why a task stopped, in one line: who stopped it and why, else its exit code or signal. */
export function stoppedText(task) {
  if (isActive(task)) return ''
  const parts = []
  if (task.stoppedBy) parts.push(task.stoppedBy)
  if (task.reason) parts.push(visible(task.reason))
  // The reason often names the signal already ("killed by request (SIGINT)").
  if (task.signal && !(task.reason ?? '').includes(task.signal)) parts.push(task.signal)
  else if (!task.signal && task.exitCode !== null && task.exitCode !== undefined && (parts.length === 0 || task.state !== 'exited')) parts.push(`exit ${task.exitCode}`)
  return parts.join(' · ')
}
