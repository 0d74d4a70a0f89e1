import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import type { RanAs, SandboxProfile } from '../../protocol/index.js'
import type { DaemonConfig } from '../config.js'
import { IDMAP_UNSUPPORTED, KEYRING_UNSUPPORTED, type PinnedDir, type Spawner } from '../spawn/spawner.js'
import type { IdmappedRoot } from './path-policy.js'

/**
 * Who tasks run as, decided once at daemon start. A root daemon runs its sandboxed tasks on a uid
 * and gid of their own that own nothing on the host: their writable folders are idmapped (the
 * spawner's child mounts them while still root, daemon/spawner/idmap.c), so the task writes them
 * as their owners would, and what it makes there belongs to each folder's owner on disk; the
 * daemon's HOME is shown to it read-only the same way. taskUser overrides this for every profile;
 * an unprivileged daemon's tasks keep its uid; `off` is the daemon's (or taskUser's).
 */
export interface TaskIdentity {
  /** Who workspace and strict tasks run as: `task` (their own identity), `taskUser`, or `daemon` (the daemon's uid). */
  as: 'task' | 'taskUser' | 'daemon'
  uid: number
  gid: number
  /** Who `off` tasks run as. */
  off: { as: 'taskUser' | 'daemon'; uid: number; gid: number }
  /** The daemon's HOME (real path) shown read-only, idmapped, to tasks on their own identity; null for none. */
  home: string | null
  /** Why a root daemon's sandboxed tasks run as uid 0 (without capabilities) instead of their own identity; null when they do not. */
  fallback: string | null
  /** Whether every task gets a session keyring of its own (the native spawner's child joins a new one). */
  keyring: { fresh: true } | { fresh: false; reason: string }
}

/** Where task identities are taken from: ids no distribution, systemd or container range hands out. */
export const TASK_ID_FIRST = 1879048192
export const TASK_ID_LAST = 2147483646
/** systemd's "foreign" range (images of other systems), inside the one above: left alone. */
const FOREIGN_FIRST = 2147352576
const FOREIGN_LAST = 2147418111
const PROBE_TIMEOUT_MS = 10_000
const PROBE_PREFIX = 'identity-probe-'
/** How many ids after the home's own are tried before giving up. */
const MAX_PROBES = 4096

/**
 * A uid (and gid: the same number) for a tend home's tasks: derived from a hash of the home's real
 * path (so the same home gets the same id at every start, and two homes two ids), then the next free one when the user or group
 * database knows it, or a subordinate id range (/etc/subuid, /etc/subgid) contains it. Null when
 * none is free within MAX_PROBES.
 */
export function chooseTaskId(homeRealPath: string, taken: (id: number) => boolean): number | null {
  const span = TASK_ID_LAST - TASK_ID_FIRST + 1
  const offset = createHash('sha256').update(homeRealPath).digest().readUInt32BE(0) % span
  for (let step = 0; step < MAX_PROBES; step++) {
    const id = TASK_ID_FIRST + ((offset + step) % span)
    if (id >= FOREIGN_FIRST && id <= FOREIGN_LAST) continue
    if (!taken(id)) return id
  }
  return null
}

/** Whether NSS knows `id` as a user or a group, or a subordinate range holds it; throws when getent cannot answer. */
export function idTaken(id: number): boolean {
  for (const database of ['passwd', 'group']) {
    const result = spawnSync('getent', [database, String(id)], { encoding: 'utf8', timeout: 5000 })
    if (result.error) throw new Error(`getent ${database} ${id} could not run: ${result.error.message}`)
    // getent: 0 found, 2 not found; anything else is no answer.
    if (result.status === 0) return true
    if (result.status !== 2) throw new Error(`getent ${database} ${id} exited ${result.status}: ${result.stderr.trim()}`)
  }
  return subordinateRanges().some(([first, count]) => id >= first && id < first + count)
}

function subordinateRanges(): Array<[number, number]> {
  const ranges: Array<[number, number]> = []
  for (const file of ['/etc/subuid', '/etc/subgid']) {
    let text = ''
    try {
      text = readFileSync(file, 'utf8')
    } catch {
      continue
    }
    for (const line of text.split('\n')) {
      const [, first, count] = line.trim().split(':')
      if (first && count && /^\d+$/.test(first) && /^\d+$/.test(count)) ranges.push([Number(first), Number(count)])
    }
  }
  return ranges
}

export interface IdentityContext {
  config: Readonly<DaemonConfig>
  spawner: Spawner
  /** bubblewrap, as detected (the probe runs it); null without. */
  bwrapPath: string | null
  /** Why workspace cannot run here (then sandboxed tasks never start), if so. */
  workspaceMissing: string | undefined
  /** The daemon's uid and gid (process.getuid/getgid; given for tests). */
  daemon?: { uid: number; gid: number }
  /** Runs one probe spawn as the identity; default: probeIdentity. */
  probe?: (identity: { uid: number; gid: number }, home: string | null) => Promise<string | null>
}

/** Decides who tasks run as (see TaskIdentity), probing a root daemon's choice once with a real spawn. */
export async function decideTaskIdentity(context: IdentityContext): Promise<TaskIdentity> {
  const { config, spawner } = context
  const daemon = context.daemon ?? { uid: process.getuid!(), gid: process.getgid!() }
  const keyring: TaskIdentity['keyring'] = spawner.kind === 'native' ? { fresh: true } : { fresh: false, reason: KEYRING_UNSUPPORTED }
  const ownUid = { as: 'daemon' as const, ...daemon, home: null, keyring }
  if (config.taskIdentity) {
    const user = { as: 'taskUser' as const, ...config.taskIdentity }
    return { ...user, off: user, home: null, fallback: null, keyring }
  }
  const off = { as: 'daemon' as const, ...daemon }
  if (daemon.uid !== 0) return { ...ownUid, off, fallback: null }
  const fallback = (reason: string): TaskIdentity => ({ ...ownUid, off, fallback: reason })
  if (context.workspaceMissing) return fallback(`sandboxed tasks cannot run here (${context.workspaceMissing})`)
  if (spawner.kind !== 'native') return fallback(IDMAP_UNSUPPORTED)
  const home = realHome(config.baseEnv.HOME)
  let id: number | null
  try {
    id = chooseTaskId(realpathSync.native(config.layout.home), idTaken)
  } catch (error) {
    return fallback(`no free uid could be chosen for the tasks: ${(error as Error).message}`)
  }
  if (id === null) return fallback(`no uid from ${TASK_ID_FIRST} on is free for the tasks (the user database or a subordinate range holds the next ${MAX_PROBES})`)
  const identity = { uid: id, gid: id }
  const bwrap = context.bwrapPath ?? 'bwrap'
  const probe = context.probe ?? ((who, shown) => probeIdentity(spawner, config, bwrap, who, shown))
  // The spawner's pipes never hold the event loop open, and nothing else does yet at start: this
  // timer keeps the daemon alive through the probe, and bounds it.
  let timer: NodeJS.Timeout | undefined
  const timedOut = new Promise<string>((resolve) => (timer = setTimeout(() => resolve(`the probe (bubblewrap as uid ${id}) did not end within ${PROBE_TIMEOUT_MS} ms`), PROBE_TIMEOUT_MS)))
  const problem = await Promise.race([probe(identity, home), timedOut]).finally(() => clearTimeout(timer))
  if (problem) return fallback(problem)
  return { as: 'task', ...identity, off, home, fallback: null, keyring }
}

/** HOME's real path, if it is a folder other than `/` (showing `/` would show everything). */
function realHome(home: string | undefined): string | null {
  if (!home) return null
  try {
    const real = realpathSync.native(home)
    return real !== '/' && statSync(real).isDirectory() ? real : null
  } catch {
    return null
  }
}

/**
 * One spawn as the identity, as a sandboxed task would start: bubblewrap, unprivileged, with an
 * idmapped view of HOME and of a fresh folder in TEND_HOME (the spool's file system). Null when it
 * ran, else why not.
 */
async function probeIdentity(spawner: Spawner, config: Readonly<DaemonConfig>, bwrapPath: string, identity: { uid: number; gid: number }, home: string | null): Promise<string | null> {
  // One a daemon that died mid-probe left (the home is this daemon's alone: it holds its lock).
  for (const name of readdirSync(config.layout.home)) if (name.startsWith(PROBE_PREFIX)) rmSync(join(config.layout.home, name), { recursive: true, force: true })
  const dir = mkdtempSync(join(config.layout.home, PROBE_PREFIX))
  try {
    const views = [dir, ...(home ? [home] : [])].map((path) => viewOf(path)).filter((view): view is PinnedDir => view !== null)
    const outputFile = join(dir, 'output.log')
    const bwrap = [bwrapPath, '--unshare-user', '--disable-userns', '--ro-bind', '/', '/', '--', '/bin/true']
    const outcome = await spawner.spawn({
      file: bwrap[0]!,
      argv: bwrap,
      env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' },
      cwd: '/',
      outputFile,
      exitFile: '',
      extraFiles: [],
      cgroups: [],
      limits: { openFiles: 256, fileSizeBytes: 1024 * 1024 },
      user: identity,
      idmappedViews: views,
    })
    if (!outcome.started) return outcome.message
    const exit = await outcome.exited
    if (exit.exitCode === 0) return null
    const said = readFileSync(outputFile, 'utf8').trim().slice(0, 300)
    return `bubblewrap as uid ${identity.uid} ended with ${exit.signal ?? `exit code ${exit.exitCode}`}${said ? `: ${said}` : ''}`
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** A folder as an idmapped view: its identity and owner now; null when it cannot be read. */
export function viewOf(path: string): PinnedDir | null {
  try {
    const info = statSync(path, { bigint: true })
    if (!info.isDirectory()) return null
    return { path, dev: String(info.dev), ino: String(info.ino), owner: { uid: Number(info.uid), gid: Number(info.gid) } }
  } catch {
    return null
  }
}

/** Who a task of this profile runs as, and how. */
export interface TaskRunAs {
  /** The user the spawner switches to; null: the daemon's own. */
  user: { uid: number; gid: number } | null
  /** Writable folders idmapped onto `user`, and HOME shown through an idmapped view. */
  idmap: boolean
  ranAs: RanAs
}

/** Who a task of this profile runs as; `fallback`: its own identity could not be had for it (then uid 0). */
export function taskRunAs(profile: SandboxProfile, identity: TaskIdentity, fallback?: string): TaskRunAs {
  const keyring = identity.keyring.fresh ? 'own' : 'daemon'
  if (profile === 'off') {
    const { as, uid, gid } = identity.off
    return { user: as === 'taskUser' ? { uid, gid } : null, idmap: false, ranAs: { uid, gid, identity: as, keyring } }
  }
  if (identity.as === 'task' && fallback === undefined) {
    return { user: { uid: identity.uid, gid: identity.gid }, idmap: true, ranAs: { uid: identity.uid, gid: identity.gid, identity: 'task', keyring } }
  }
  if (identity.as === 'taskUser') return { user: { uid: identity.uid, gid: identity.gid }, idmap: false, ranAs: { uid: identity.uid, gid: identity.gid, identity: 'taskUser', keyring } }
  const { uid, gid } = identity.off
  const reason = fallback ?? identity.fallback
  return { user: null, idmap: false, ranAs: reason ? { uid, gid, identity: 'daemon', fallback: reason, keyring } : { uid, gid, identity: 'daemon', keyring } }
}

/** For admission: who must reach a sandboxed task's folders, and what it sees through idmapped mounts. */
export function admissionIdentity(identity: TaskIdentity): { user: { uid: number; gid: number } | null; views: IdmappedRoot[]; idmapWritable: boolean; userLabel: string } {
  if (identity.as === 'taskUser') return { user: { uid: identity.uid, gid: identity.gid }, views: [], idmapWritable: false, userLabel: 'taskUser' }
  if (identity.as === 'daemon') return { user: null, views: [], idmapWritable: false, userLabel: 'the daemon' }
  const home = identity.home ? viewOf(identity.home) : null
  return { user: { uid: identity.uid, gid: identity.gid }, views: home ? [{ path: home.path, ...home.owner! }] : [], idmapWritable: true, userLabel: "the tasks' own identity" }
}
