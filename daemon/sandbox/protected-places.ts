import { existsSync, realpathSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { resolveHome } from '../../protocol/index.js'
import type { DaemonConfig } from '../config.js'
import type { EveryUserPlaces } from './every-user-places.js'
import { isWithin, type ProtectedPlace } from './path-policy.js'
import { foldersOnTheWay, HOME_SECRETS, secretPaths } from './secret-paths.js'

/** What no sandboxed task may be given to write, and what every one of them gets masked. */
export interface ProtectedView {
  /** Refused as (or around, or inside) a cwd or writable path. */
  places: ProtectedPlace[]
  /** Real paths covered by an empty read-only folder or file inside the sandbox; none inside another. */
  masks: string[]
}

export interface DaemonHomes {
  /** Real paths of every running daemon's TEND_HOME (this one's included) and the default home. */
  homes: () => string[]
  /** Where the daemons of this uid register their homes (registry-folders.ts). */
  registries: () => readonly string[]
  /**
   * Every user's places (every-user-places.ts), for a daemon whose tasks act as someone else than
   * the daemon (a root daemon's tasks on their own identity, or taskUser); absent otherwise.
   */
  everyUser?: () => EveryUserPlaces
}

/**
 * Every tend home (this daemon's, the default one, every running daemon's), the secret paths,
 * tend's own credential files and, where tasks act as other folders' owners, every user's places,
 * each as its real path: a mask or a refusal on a symlink's own path would miss what it leads to.
 */
export function protectedView(config: Readonly<DaemonConfig>, daemons: DaemonHomes): ProtectedView {
  const homes = new Set<string>()
  for (const home of [config.layout.home, resolveHome({ ...config.baseEnv, TEND_HOME: undefined }), ...daemons.homes()]) {
    const real = realOrNull(home)
    if (real) homes.add(real)
  }
  const secrets = new Set<string>()
  for (const path of [...secretPaths(config.baseEnv.HOME), ...tendCredentials(config)]) {
    const real = realOrNull(path)
    if (real) secrets.add(real)
  }
  const registries = daemons
    .registries()
    .map(realOrNull)
    .filter((path): path is string => path !== null)
  const everyUser = daemons.everyUser?.()
  return {
    places: [
      ...[...homes].map((path) => ({ path, what: 'a tend home (TEND_HOME: sockets, spool, logs)' })),
      ...registries.map((path) => ({ path, what: "tend's registry of daemon homes" })),
      ...[...secrets].map((path) => ({ path, what: 'a masked secret path' })),
      ...(everyUser?.places ?? []),
    ],
    masks: outermost([...homes, ...secrets, ...(everyUser?.masks ?? [])]),
  }
}

/** However still its folders look, the view is worked out again at least this often. */
const REFRESH_MS = 1000

/**
 * protectedView() for a caller that asks for every task (twice: its admission and its launch): the
 * same view until something it was made from may have changed. It is made again when the homes or
 * registries the daemon knows change, when every user's places change, when a folder holding a
 * secret path or a credential file changes (a path made, removed or swapped for a link changes its
 * folder), when one of them changed in the last second (a coarse clock could hide a second change),
 * and at least every second (a link's target changed deeper down).
 */
export function cachedProtectedView(config: Readonly<DaemonConfig>, daemons: DaemonHomes): () => ProtectedView {
  const home = config.baseEnv.HOME
  // Every folder on the way to a secret path in HOME (`.local/share/fish` made changes `.local/share`), and those of the others.
  const inHome = home ? [home, ...foldersOnTheWay(HOME_SECRETS).map((folder) => join(home, folder))] : []
  const folders = [...new Set([...inHome, ...[...secretPaths(undefined), ...tendCredentials(config)].map((path) => dirname(path))])]
  let cached: { stamp: string; everyUser: unknown; at: number; view: ProtectedView } | null = null
  return () => {
    const now = Date.now()
    const everyUser = daemons.everyUser?.()
    const stamp = stampOf(folders, [...daemons.homes(), '|', ...daemons.registries()], now)
    if (cached && stamp !== null && cached.stamp === stamp && cached.everyUser === everyUser && now - cached.at < REFRESH_MS) return cached.view
    const view = protectedView(config, daemons)
    cached = stamp === null ? null : { stamp, everyUser, at: now, view }
    return view
  }
}

/** The folders' identities and change times, and the names: null when one changed just now. */
function stampOf(folders: readonly string[], names: readonly string[], now: number): string | null {
  const parts: string[] = [...names]
  for (const folder of folders) {
    const info = statSync(folder, { bigint: true, throwIfNoEntry: false })
    if (info && now - Number(info.ctimeMs) < REFRESH_MS) return null
    parts.push(info ? `${info.dev}:${info.ino}:${info.ctimeNs}` : '-')
  }
  return parts.join('\0')
}

/**
 * tend's own credentials: the cluster key and the Redis URL file a worker was given (whoever reads
 * them starts tasks on every worker), the console's tokens (in the home, masked with it; named for
 * a home that is not) and its TLS key (whoever holds it poses as the console). The default places
 * (~/.config/tend) are secret paths.
 */
function tendCredentials(config: Readonly<DaemonConfig>): string[] {
  return [config.clusterKeyFile, config.clusterRedisUrlFile, config.layout.consoleTokens, config.consoleTlsKey].filter((path): path is string => path !== null)
}

/**
 * The masks without those inside another: inside an empty read-only folder there is nothing to
 * cover, and bubblewrap could not make the mount point.
 */
function outermost(paths: readonly string[]): string[] {
  const unique = [...new Set(paths)].sort((a, b) => a.length - b.length)
  const kept: string[] = []
  for (const path of unique) if (!kept.some((outer) => isWithin(path, outer))) kept.push(path)
  return kept
}

function realOrNull(path: string): string | null {
  // Most secret paths do not exist: asking first spares an exception per path per task.
  if (!existsSync(path)) return null
  try {
    return realpathSync.native(path)
  } catch {
    return null
  }
}
