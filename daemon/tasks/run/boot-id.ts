import { readFileSync } from 'node:fs'

/** This boot's id: a task recorded in another boot cannot still be running. */
export function readBootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
  } catch {
    return 'unknown'
  }
}
