import { formatBytes, formatDuration, TendError, visibleLine, visibleText, type Task, type TaskState } from '../../protocol/index.js'
import { inFlagTerms } from './flag-names.js'
import { paintMarked, shownWidth, unmarkPaint } from './paint.js'

/**
 * Where a command prints: stdout for results, stderr for messages; colour only on a TTY. Text goes
 * through visibleText (no control sequence of a record's reaches the terminal), then gets the CLI's
 * own colours (paint.ts); a task's own output goes byte for byte through writeRaw, as `tend logs`
 * promises. On a terminal, the first line of tend's own after raw output starts by cancelling any
 * sequence the output left open (CAN) and resetting its attributes: concealed text or an unfinished
 * title must not swallow what tend says next.
 */
export interface CliIo {
  json: boolean
  out: (text: string) => void
  err: (text: string) => void
  writeRaw: (bytes: Buffer) => Promise<void>
  colour: boolean
}

/** Where createIo writes: the process's own streams unless given. */
export interface CliStreams {
  stdout: NodeJS.WritableStream & { isTTY?: boolean }
  stderr: NodeJS.WritableStream & { isTTY?: boolean }
}

/**
 * CAN ends any escape sequence in progress; then the ASCII character set in G0, shifted in (line
 * drawing would turn letters into glyphs), SGR 0 (colours and attributes: concealed, reversed …),
 * the terminal's default colours again (OSC 110/111: a task may have set both to black), and a
 * visible cursor. The alternate screen is left as it is: leaving one that was never entered would
 * move the cursor.
 */
const TERMINAL_RESET = '\u0018\u001b(B\u000f\u001b[0m\u001b]110\u0007\u001b]111\u0007\u001b[?25h'

export function createIo(json: boolean, env: Record<string, string | undefined>, streams: CliStreams = process): CliIo {
  const { stdout, stderr } = streams
  let rawWritten = false
  const print = (stream: CliStreams['stdout'], text: string) => {
    const reset = rawWritten && stream.isTTY ? TERMINAL_RESET : ''
    rawWritten = false
    stream.write(`${reset}${unmarkPaint(visibleText(text))}\n`)
  }
  return {
    json,
    out: (text) => print(stdout, text),
    err: (text) => print(stderr, text),
    writeRaw: (bytes) => {
      rawWritten = true
      return new Promise((resolve) => (stdout.write(bytes) ? resolve() : stdout.once('drain', resolve)))
    },
    colour: Boolean(stdout.isTTY) && !('NO_COLOR' in env),
  }
}

export function printJson(io: CliIo, value: unknown): void {
  io.out(JSON.stringify(value, null, 2))
}

const STATE_COLOURS: Record<TaskState, number> = { queued: 33, running: 36, exited: 32, killed: 35, timed_out: 35, failed: 31, lost: 31, corrupt: 31 }

export function paintState(io: CliIo, task: Task): string {
  const text = task.state === 'exited' && task.exitCode !== 0 ? `exited(${task.exitCode})` : task.state
  if (!io.colour) return text
  const colour = task.state === 'exited' && task.exitCode !== 0 ? 31 : STATE_COLOURS[task.state]
  return paintMarked(colour, text)
}

/** ` (stopped by: timeout)`, or nothing for a task nobody stopped (records of older tends have no stoppedBy). */
export function stoppedByText(task: Task): string {
  return task.stoppedBy ? ` (stopped by: ${task.stoppedBy})` : ''
}

/** The state column of `tend ps`: the state, and who stopped the task (`killed(operator)`), as `exited(N)` adds the code. */
export function stateCell(io: CliIo, task: Task): string {
  const state = paintState(io, task)
  return task.stoppedBy ? `${state}(${task.stoppedBy})` : state
}

export function ageOf(task: Task, now = Date.now()): string {
  return formatDuration(now - Date.parse(task.createdAt))
}

export function exitText(task: Task): string {
  if (task.exitCode !== null) return String(task.exitCode)
  if (task.signal) return task.signal
  return '-'
}

export function outputText(task: Task): string {
  return formatBytes(task.outputBytes)
}

/** A plain table: columns padded to their widest cell (the CLI's colours not counted), each cell on its one line. */
export function formatTable(header: string[], rawRows: string[][]): string {
  const rows = rawRows.map((row) => row.map(visibleLine))
  const widths = header.map((title, column) => Math.max(shownWidth(title), ...rows.map((row) => shownWidth(row[column] ?? ''))))
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell + ' '.repeat(widths[column]! - shownWidth(cell))))
      .join('  ')
      .trimEnd()
  return [line(header), ...rows.map(line)].join('\n')
}

/** Prints an error the way every command does: a message on stderr, and in --json the wire shape on stdout. */
export function reportError(io: CliIo, error: unknown): void {
  const tendError =
    error instanceof TendError ? error : new TendError('TEND_ERR_INTERNAL', { detail: (error as Error)?.message ?? String(error) }, { cause: error })
  const { message, flags } = inFlagTerms(tendError)
  // --json keeps the daemon's message; the flags it is about are added beside it.
  if (io.json) printJson(io, { error: { ...tendError.toWire(), ...(flags.length > 0 ? { flags } : {}) } })
  io.err(`tend: ${message}`)
}
