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
