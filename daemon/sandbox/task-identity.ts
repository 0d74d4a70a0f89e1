import { mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { DEFAULT_OWNER, type RanAs, type SandboxProfile } from '../../protocol/index.js'
import type { DaemonConfig } from '../config.js'
import { IDMAP_UNSUPPORTED, KEYRING_UNSUPPORTED, type PinnedDir, type Spawner } from '../spawn/spawner.js'
import type { IdmappedRoot } from './path-policy.js'
import { localIds } from './local-ids.js'
import { OwnerIds, type OwnerIdsResult } from './owner-ids.js'

/**
 * Who tasks run as, decided once at daemon start. A root daemon runs its sandboxed tasks on
 * identities of their own that own nothing on the host, one uid and gid per owner of tasks
 * (owner-ids.ts): their writable folders are idmapped (the spawner's child mounts them while still
 * root, daemon/spawner/idmap.c), so the task writes them as their owners would, and what it makes
 * there belongs to each folder's owner on disk; the daemon's HOME is shown to it read-only the same
 * way. taskUser overrides this for every profile; an unprivileged daemon's tasks keep its uid;
 * `off` is the daemon's (or taskUser's).
 */
export type TaskIdentity = SandboxedAs & {
  /** Who `off` tasks run as. */
  off: { as: 'taskUser' | 'daemon'; uid: number; gid: number }
  /** The daemon's HOME (real path) shown read-only, idmapped, to tasks on their own identity; null for none. */
  home: string | null
  /** Why a root daemon's sandboxed tasks run as uid 0 (without capabilities) instead of their own identity; null when they do not. */
  fallback: string | null
  /** Whether every task gets a session keyring of its own (the native spawner's child joins a new one). */
  keyring: { fresh: true } | { fresh: false; reason: string }
}

/**
 * Who workspace and strict tasks run as: `task`, each owner's own ids (`owners`); `taskUser`; or
 * `daemon` (the daemon's uid).
 */
export type SandboxedAs = { as: 'task'; uid: null; gid: null; owners: OwnerIds } | { as: 'taskUser' | 'daemon'; uid: number; gid: number; owners: null }

const PROBE_TIMEOUT_MS = 10_000
const PROBE_PREFIX = 'identity-probe-'

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
  /** Where owners get their ids; default: one for the home's real path. */
  owners?: OwnerIds
}

/** Decides who tasks run as (see TaskIdentity), probing a root daemon's choice once with a real spawn. */
export async function decideTaskIdentity(context: IdentityContext): Promise<TaskIdentity> {
  const { config, spawner } = context
  const daemon = context.daemon ?? { uid: process.getuid!(), gid: process.getgid!() }
  const keyring: TaskIdentity['keyring'] = spawner.kind === 'native' ? { fresh: true } : { fresh: false, reason: KEYRING_UNSUPPORTED }
  const ownUid = { as: 'daemon' as const, ...daemon, owners: null, home: null, keyring }
  if (config.taskIdentity) {
    const user = { as: 'taskUser' as const, ...config.taskIdentity }
    return { ...user, owners: null, off: user, home: null, fallback: null, keyring }
  }
  const off = { as: 'daemon' as const, ...daemon }
  if (daemon.uid !== 0) return { ...ownUid, off, fallback: null }
  const fallback = (reason: string): TaskIdentity => ({ ...ownUid, off, fallback: reason })
  if (context.workspaceMissing) return fallback(`sandboxed tasks cannot run here (${context.workspaceMissing})`)
  if (spawner.kind !== 'native') return fallback(IDMAP_UNSUPPORTED)
  const home = realHome(config.baseEnv.HOME)
  const owners = context.owners ?? new OwnerIds(realpathSync.native(config.layout.home))
  // Probed on the ids of the operator's tasks (the default owner): every owner's are alike.
  const identity = await owners.idsFor(DEFAULT_OWNER)
  if ('problem' in identity) return fallback(identity.problem)
  const bwrap = context.bwrapPath
  if (bwrap === null) return fallback('bubblewrap was not found on PATH')
  const probe = context.probe ?? ((who, shown) => probeIdentity(spawner, config, bwrap, who, shown))
  // The spawner's pipes never hold the event loop open, and nothing else does yet at start: this
  // timer keeps the daemon alive through the probe, and bounds it.
  let timer: NodeJS.Timeout | undefined
  const timedOut = new Promise<string>(
    (resolve) =>
      (timer = setTimeout(() => resolve(`the probe (bubblewrap as uid ${identity.uid}) did not end within ${PROBE_TIMEOUT_MS} ms`), PROBE_TIMEOUT_MS)),
  )
  const problem = await Promise.race([probe(identity, home), timedOut]).finally(() => clearTimeout(timer))
  if (problem) return fallback(problem)
  return { as: 'task', uid: null, gid: null, owners, off, home, fallback: null, keyring }
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
async function probeIdentity(
  spawner: Spawner,
  config: Readonly<DaemonConfig>,
  bwrapPath: string,
  identity: { uid: number; gid: number },
  home: string | null,
): Promise<string | null> {
  // One a daemon that died mid-probe left (the home is this daemon's alone: it holds its lock).
  for (const name of readdirSync(config.layout.home))
    if (name.startsWith(PROBE_PREFIX)) rmSync(join(config.layout.home, name), { recursive: true, force: true })
  const dir = mkdtempSync(join(config.layout.home, PROBE_PREFIX))
  try {
    const views = [dir, ...(home ? [home] : [])].map((path) => viewOf(path, identity)).filter((view): view is PinnedDir => view !== null)
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

/** A folder as an idmapped view for `task`: its identity now, and how its owner is mapped (idmapOwner); null when it cannot be read. */
export function viewOf(path: string, task: { uid: number; gid: number }): PinnedDir | null {
  try {
    const info = statSync(path, { bigint: true })
    if (!info.isDirectory()) return null
    return { path, dev: String(info.dev), ino: String(info.ino), owner: idmapOwner(Number(info.uid), task) }
  } catch {
    return null
  }
}

/**
 * What an idmapped folder of `ownerUid` shows as `task`'s uid and gid: the owner, and the owner's
 * primary group as /etc/passwd gives it (localIds), never the folder's own group: a folder's group
 * can be one its owner is not in (a folder tend-test:root), whose rights the task must not get.
 * What the task creates there gets that group, as the owner's own files would. An owner no passwd
 * entry names (a directory service's user, a uid from elsewhere) has no group the daemon can know:
 * the task's gid is then mapped onto itself, a number no user or group holds (owner-ids.ts), so
 * the task gets no group's rights there, and what it creates carries that number as its group.
 */
export function idmapOwner(ownerUid: number, task: { uid: number; gid: number }): { uid: number; gid: number } {
  return { uid: ownerUid, gid: localIds.primaryGroupOf(ownerUid) ?? task.gid }
}

/** Who a task of this profile runs as, and how. */
export interface TaskRunAs {
  /** The user the spawner switches to; null: the daemon's own. */
  user: { uid: number; gid: number } | null
  /** Writable folders idmapped onto `user`, and HOME shown through an idmapped view. */
  idmap: boolean
  ranAs: RanAs
}

/**
 * The ids of an owner's sandboxed tasks when they run on their own identity (null when they do
 * not: taskUser, the daemon's uid), or why it has none (its tasks then fall back to uid 0).
 */
export function ownerIdsOf(identity: TaskIdentity, owner: string): Promise<OwnerIdsResult> | null {
  return identity.as === 'task' ? identity.owners.idsFor(owner) : null
}

/**
 * Who a task of this profile runs as. `own`: its owner's ids, for a daemon whose sandboxed tasks
 * run on their own identity (the launch refuses a task whose owner has none: task-identity's
 * fallback is the machine's, never one task's).
 */
export function taskRunAs(profile: SandboxProfile, identity: TaskIdentity, own: { uid: number; gid: number } | null): TaskRunAs {
  const keyring = identity.keyring.fresh ? 'own' : 'daemon'
  if (profile === 'off') {
    const { as, uid, gid } = identity.off
    return { user: as === 'taskUser' ? { uid, gid } : null, idmap: false, ranAs: { uid, gid, identity: as, keyring } }
  }
  if (identity.as === 'task' && own) {
    return { user: own, idmap: true, ranAs: { uid: own.uid, gid: own.gid, identity: 'task', keyring } }
  }
  if (identity.as === 'taskUser')
    return { user: { uid: identity.uid, gid: identity.gid }, idmap: false, ranAs: { uid: identity.uid, gid: identity.gid, identity: 'taskUser', keyring } }
  const { uid, gid } = identity.off
  const reason = identity.fallback ?? (identity.as === 'task' ? 'its owner has no task uid' : null)
  return { user: null, idmap: false, ranAs: reason ? { uid, gid, identity: 'daemon', fallback: reason, keyring } : { uid, gid, identity: 'daemon', keyring } }
}

/**
 * For admission: who must reach a sandboxed task's folders, and what it sees through idmapped
 * mounts. `own`: the owner's ids (see taskRunAs); without them the task runs as the daemon.
 */
export function admissionIdentity(
  identity: TaskIdentity,
  own: { uid: number; gid: number } | null,
): { user: { uid: number; gid: number } | null; views: IdmappedRoot[]; idmapWritable?: (ownerUid: number) => { uid: number; gid: number }; userLabel: string } {
  if (identity.as === 'taskUser') return { user: { uid: identity.uid, gid: identity.gid }, views: [], userLabel: 'taskUser' }
  if (identity.as === 'daemon' || !own) return { user: null, views: [], userLabel: 'the daemon' }
  const home = identity.home ? viewOf(identity.home, own) : null
  return {
    user: own,
    views: home ? [{ path: home.path, ...home.owner! }] : [],
    idmapWritable: (ownerUid) => idmapOwner(ownerUid, own),
    userLabel: "the tasks' own identity",
  }
}
