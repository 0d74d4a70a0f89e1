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
