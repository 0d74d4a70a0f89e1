import { join } from 'node:path'

export const RECORD_FILE = 'task.json'
export const OUTPUT_FILE = 'output.log'

export function taskDir(spoolRoot: string, id: string): string {
  return join(spoolRoot, id)
}

export function recordPath(spoolRoot: string, id: string): string {
  return join(spoolRoot, id, RECORD_FILE)
}

export function outputPath(spoolRoot: string, id: string): string {
  return join(spoolRoot, id, OUTPUT_FILE)
}

/** Written by the task's keeper when the task ends: its exit status, even when no daemon runs. */
export const EXIT_FILE = 'exit.json'

export function exitPath(spoolRoot: string, id: string): string {
  return join(spoolRoot, id, EXIT_FILE)
}

/** The task's stdin when it was started with a pipe: a FIFO made and held by its keeper. */
export const INPUT_FIFO = 'input.fifo'
/** Every byte written to the task's stdin, in order (what was typed, for operators). */
export const INPUT_LOG = 'input.log'

export function inputFifoPath(spoolRoot: string, id: string): string {
  return join(spoolRoot, id, INPUT_FIFO)
}

export function inputLogPath(spoolRoot: string, id: string): string {
  return join(spoolRoot, id, INPUT_LOG)
}

/** A terminal task's resize requests ("<cols> <rows>\n" each): a FIFO made and held by its keeper. */
export const RESIZE_FIFO = 'resize.fifo'

export function resizeFifoPath(spoolRoot: string, id: string): string {
  return join(spoolRoot, id, RESIZE_FIFO)
}
