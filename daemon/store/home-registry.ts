import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs'
import { mkdir, open, rename, rm } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { resolveHome } from '../../protocol/index.js'

type Env = Readonly<Record<string, string | undefined>>

/**
 * The per-user folder where every running daemon announces its home, so that sandboxes can hide
 * all of them (a task must not reach any daemon's socket): beside the default home, as
 * `$XDG_STATE_HOME/tend-homes`, else `~/.local/state/tend-homes`. TEND_HOME does not move it.
 */
export function homeRegistryDir(env: Env): string {
  return join(dirname(defaultHome(env)), 'tend-homes')
}

/** The home a daemon uses when TEND_HOME is not set (protocol/paths.ts decides). */
function defaultHome(env: Env): string {
  return resolveHome({ ...env, TEND_HOME: undefined })
}

/** One file per running daemon: `<hash of its home>-<pid>.json`, so pruning a dead one never removes a live one. */
interface RegistryEntry {
  home: string
  pid: number
  /** Start time of the process in clock ticks since boot (/proc/<pid>/stat): a reused pid does not match. */
  startTicks: number | null
}

/**
 * Announces a running daemon's home (its real path): written atomically (a temporary file, fsync,
 * rename). Answers the function that removes it again, for a clean stop.
 */
export async function registerHome(home: string, env: Env, pid: number = process.pid): Promise<() => Promise<void>> {
  const dir = homeRegistryDir(env)
  await mkdir(dir, { recursive: true, mode: 0o700 })
  const realHome = realpathSync(home)
  const entry: RegistryEntry = { home: realHome, pid, startTicks: processStartTicks(pid) }
  const file = join(dir, `${homeHash(realHome)}-${pid}.json`)
  const temporary = `${file}.tmp`
  const handle = await open(temporary, 'w', 0o600)
  try {
    await handle.writeFile(`${JSON.stringify(entry)}\n`)
    await handle.sync()
  } finally {
    await handle.close()
  }
  await rename(temporary, file)
  return () => rm(file, { force: true })
}

/**
 * Real paths of every home a live daemon registered (dead entries are removed, best effort), plus
 * the default home (its real path when it exists), without duplicates. Synchronous and cheap: it is
 * meant to be called for each sandboxed task.
 */
export function liveDaemonHomes(env: Env): string[] {
  const homes = new Set<string>([realPathOrSelf(defaultHome(env))])
  const dir = homeRegistryDir(env)
  if (!existsSync(dir)) return [...homes]
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return [...homes]
  }
  for (const name of names) {
    if (!name.endsWith('.json')) continue
    const file = join(dir, name)
    const entry = readEntry(file)
    if (entry === null) continue
    if (!isRunning(entry)) {
      rmSync(file, { force: true })
      continue
    }
    if (existsSync(entry.home)) homes.add(realPathOrSelf(entry.home))
  }
  return [...homes]
}

/** A registry unchanged for this long is trusted to stay as read: its folder's mtime ticks coarsely. */
const SETTLED_MS = 1000

/**
 * liveDaemonHomes() for a caller that asks per task: the registry is read again only when its
 * folder has changed (a daemon registered or left). A daemon that died without leaving stays
 * masked until then, which hides nothing that should be seen. A folder changed within the last
 * second is read every time: a change in the same tick of its mtime would otherwise be missed.
 */
export function cachedLiveDaemonHomes(env: Env): () => string[] {
  const dir = homeRegistryDir(env)
  let cached: { stamp: string; registered: string[] } | null = null
  return () => {
    let stamp: string | null = null
    try {
      const info = statSync(dir, { bigint: true })
      if (Date.now() - Number(info.mtimeMs) > SETTLED_MS) stamp = `${info.dev}:${info.ino}:${info.mtimeNs}`
    } catch {
      // No registry yet: nothing registered.
    }
    if (stamp === null || cached?.stamp !== stamp) {
      const registered = liveDaemonHomes(env)
      cached = stamp === null ? null : { stamp, registered }
      return registered
    }
    // The default home may have been made since: its real path is asked each time.
    return [...new Set([realPathOrSelf(defaultHome(env)), ...cached.registered])]
  }
}

function readEntry(file: string): RegistryEntry | null {
  try {
    const entry = JSON.parse(readFileSync(file, 'utf8')) as Partial<RegistryEntry>
    if (typeof entry.home !== 'string' || !Number.isInteger(entry.pid) || (entry.pid as number) <= 0) return null
    return { home: entry.home, pid: entry.pid as number, startTicks: typeof entry.startTicks === 'number' ? entry.startTicks : null }
  } catch {
    // Unreadable or half-written by hand: left alone, it names nothing.
    return null
  }
}

function isRunning(entry: RegistryEntry): boolean {
  const startTicks = processStartTicks(entry.pid)
  if (startTicks !== null) return entry.startTicks === null || entry.startTicks === startTicks
  try {
    process.kill(entry.pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Field 22 of /proc/<pid>/stat (after the parenthesized command name, which may contain spaces). */
function processStartTicks(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const ticks = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19])
    return Number.isFinite(ticks) ? ticks : null
  } catch {
    return null
  }
}

function homeHash(realHome: string): string {
  return createHash('sha256').update(realHome).digest('hex').slice(0, 16)
}

function realPathOrSelf(path: string): string {
  // Called for every sandboxed task: no exception for the usual missing default home.
  if (!existsSync(path)) return path
  try {
    return realpathSync.native(path)
  } catch {
    return path
  }
}
