import { lstatSync, readdirSync, readFileSync, statSync } from 'node:fs'

/**
 * Which live process holds a home's instance lock (an exclusive flock on its lock file), from what
 * the kernel says: /proc/locks names the process that took each flock and the file's device and
 * inode, and /proc/<pid>/fd shows that this process still has the file open. Neither is anything a
 * task can write, unlike the pid file. Null when the lock is free, the file is missing, or the
 * holder is not visible from here (another pid namespace).
 */
export function lockHolder(lockPath: string): number | null {
  let file
  try {
    file = lstatSync(lockPath)
  } catch {
    return null
  }
  if (!file.isFile()) return null
  let locks: string
  try {
    locks = readFileSync('/proc/locks', 'utf8')
  } catch {
    return null
  }
  for (const pid of flockHolders(locks, file.dev, file.ino)) if (holdsOpen(pid, file.dev, file.ino)) return pid
  return null
}

/** Pids of the exclusive flocks on (dev, ino) in /proc/locks's text: `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`. */
export function flockHolders(locks: string, dev: number, ino: number): number[] {
  const pids: number[] = []
  for (const line of locks.split('\n')) {
    const fields = line.trim().split(/\s+/)
    // A blocked waiter's line reads `1: -> FLOCK ...`: it holds nothing.
    if (fields[1] !== 'FLOCK' || fields[3] !== 'WRITE') continue
    const [major, minor, inode] = (fields[5] ?? '').split(':')
    if (inode === undefined || Number(inode) !== ino) continue
    if (makeDev(parseInt(major!, 16), parseInt(minor!, 16)) !== dev) continue
    const pid = Number(fields[4])
    if (Number.isSafeInteger(pid) && pid > 0) pids.push(pid)
  }
  return pids
}

/** Linux's encoding of a device number, as stat reports it. */
function makeDev(major: number, minor: number): number {
  return (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & ~0xff) << 12)
}

/** Whether process `pid` has a descriptor on the file (dev, ino) open. */
function holdsOpen(pid: number, dev: number, ino: number): boolean {
  let fds: string[]
  try {
    fds = readdirSync(`/proc/${pid}/fd`)
  } catch {
    return false
  }
  return fds.some((fd) => {
    try {
      const info = statSync(`/proc/${pid}/fd/${fd}`)
      return info.dev === dev && info.ino === ino
    } catch {
      return false
    }
  })
}
