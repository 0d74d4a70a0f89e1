import { lstatSync, readdirSync, readFileSync, readlinkSync, realpathSync, statSync } from 'node:fs'
import { isAbsolute, resolve } from 'node:path'

/**
 * Which live process holds a home: the flock on its folder (what a daemon takes first: no process
 * can remove it, as it can the lock file), else the one on its lock file (a daemon of a version
 * that took only that).
 */
export function homeLockHolder(home: string, lockPath: string): number | null {
  return lockHolder(home) ?? lockHolder(lockPath)
}

/**
 * Which live process holds a home's instance lock (an exclusive flock on its folder or lock file), from what
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
  if (!file.isFile() && !file.isDirectory()) return null
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

/** What the kernel says of a process holding a lock: its real and effective uid, and its command line. */
export interface HolderProcess {
  pid: number
  uids: number[]
  argv: string[]
  /** The script a `node <script> daemon|worker` process runs, resolved against its working folder; null for any other command. */
  daemonEntry: string | null
}

/** Reads /proc/<pid> (status, cmdline, cwd); null when the process is gone or cannot be seen. */
export function holderProcess(pid: number): HolderProcess | null {
  let status: string
  let argv: string[]
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8')
    argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
  } catch {
    return null
  }
  if (argv.at(-1) === '') argv.pop()
  const uids = (/^Uid:\s+(\d+)\s+(\d+)/m.exec(status) ?? []).slice(1, 3).map(Number)
  return { pid, uids, argv, daemonEntry: daemonEntry(pid, argv) }
}

/**
 * Whether a holder is a tend daemon (or worker) of the running uid whose script is `entry` (the
 * `bin/tend.js` of this tend, as a real path): only such a process is ever signalled as the home's
 * daemon. Anything else holding the lock (a `flock` of the user's own, another tend) is named, never killed.
 */
export function isTendDaemonOf(holder: HolderProcess, entry: string): boolean {
  const uid = process.getuid!()
  if (holder.uids.length !== 2 || holder.uids.some((id) => id !== uid)) return false
  if (holder.daemonEntry === null) return false
  try {
    return realpathSync(holder.daemonEntry) === realpathSync(entry)
  } catch {
    return false
  }
}

/** The holder as an error names it: `1234` for a tend daemon, else `1234: \`flock -n daemon.lock sleep 300\`, not a tend daemon`. */
export function describeHolder(holder: HolderProcess | null, pid: number | null): string {
  if (pid === null) return 'unknown'
  if (holder === null) return `${pid}, gone or not visible`
  if (holder.daemonEntry !== null && holder.uids.every((id) => id === process.getuid!())) return String(pid)
  const command = holder.argv
    .join(' ')
    .replace(/[^\x20-\x7e]/g, '?')
    .slice(0, 200)
  return `${pid}: \`${command}\`, not a tend daemon`
}

/** `node [node options] <script> daemon|worker ...`: the script, resolved against the process's working folder. */
function daemonEntry(pid: number, argv: string[]): string | null {
  const script = argv.slice(1).find((arg) => !arg.startsWith('-'))
  if (script === undefined) return null
  const command = argv.slice(argv.indexOf(script) + 1).find((arg) => !arg.startsWith('-'))
  if (command !== 'daemon' && command !== 'worker') return null
  if (isAbsolute(script)) return script
  try {
    return resolve(readlinkSync(`/proc/${pid}/cwd`), script)
  } catch {
    return null
  }
}
