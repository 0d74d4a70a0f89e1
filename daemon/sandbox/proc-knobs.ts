import { lstatSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

/** Always bound read-only, whatever the scan finds: the knobs that give a uid-0 task the host. */
const ALWAYS = ['sys', 'sysrq-trigger']

let found: string[] | undefined

/**
 * The entries of /proc (outside the processes' own folders) holding a file the kernel lets root
 * write: core_pattern under sys, sysrq-trigger, mtrr, PSI triggers under pressure, and whatever
 * this kernel adds. A fresh proc mount leaves them writable to a uid-0 task even without
 * capabilities, so each is bound read-only over the sandbox's /proc. Found once, from the
 * kernel's own file modes, so a sandbox pays only for the entries that need it.
 */
export function writableProcEntries(): string[] {
  found ??= scan()
  return found
}

function scan(): string[] {
  const entries = new Set(ALWAYS)
  let names: string[] = []
  try {
    names = readdirSync('/proc')
  } catch {
    return [...entries]
  }
  for (const name of names) {
    if (/^\d+$/.test(name) || name === 'self' || name === 'thread-self') continue
    if (holdsWritable(join('/proc', name), 0)) entries.add(name)
  }
  return [...entries]
}

function holdsWritable(path: string, depth: number): boolean {
  let info
  try {
    info = lstatSync(path)
  } catch {
    return false
  }
  // Links (mounts, net) lead into the task's own /proc/self.
  if (info.isSymbolicLink()) return false
  if (!info.isDirectory()) return (info.mode & 0o222) !== 0
  if (depth > 8) return true
  let children: string[]
  try {
    children = readdirSync(path)
  } catch {
    return false
  }
  return children.some((child) => holdsWritable(join(path, child), depth + 1))
}
