import { formatBytes, formatDuration, TendError, visibleText, type Task, type TaskState } from '../../protocol/index.js'
import { inFlagTerms } from './flag-names.js'

/**
 * Where a command prints: stdout for results, stderr for messages; colour only on a TTY. Text goes
 * through visibleText (no control sequence of a record's reaches the terminal); a task's own output
 * goes byte for byte through writeRaw, as `tend logs` promises.
 */
export interface CliIo {
  json: boolean
  out: (text: string) => void
  err: (text: string) => void
  writeRaw: (bytes: Buffer) => Promise<void>
  colour: boolean
}

export function createIo(json: boolean, env: Record<string, string | undefined>): CliIo {
  return {
    json,
    out: (text) => process.stdout.write(`${visibleText(text)}\n`),
    err: (text) => process.stderr.write(`${visibleText(text)}\n`),
    writeRaw: (bytes) => new Promise((resolve) => (process.stdout.write(bytes) ? resolve() : process.stdout.once('drain', resolve))),
    colour: Boolean(process.stdout.isTTY) && !('NO_COLOR' in env),
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
  return `\u001b[${colour}m${text}\u001b[0m`
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

/** A plain table: columns padded to their widest cell (ANSI colour codes not counted). */
export function formatTable(header: string[], rows: string[][]): string {
  const visible = (cell: string) => cell.replace(/\u001b\[[0-9;]*m/g, '').length
  const widths = header.map((title, column) => Math.max(visible(title), ...rows.map((row) => visible(row[column] ?? ''))))
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell + ' '.repeat(widths[column]! - visible(cell))))
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
