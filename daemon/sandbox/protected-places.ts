import { existsSync, realpathSync } from 'node:fs'
import { resolveHome } from '../../protocol/index.js'
import type { DaemonConfig } from '../config.js'
import type { ProtectedPlace } from './path-policy.js'
import { secretPaths } from './secret-paths.js'

/** What no sandboxed task may be given to write, and what every one of them gets masked. */
export interface ProtectedView {
  /** Refused as (or around, or inside) a cwd or writable path. */
  places: ProtectedPlace[]
  /** Real paths covered by an empty read-only folder or file inside the sandbox. */
  masks: string[]
}

export interface DaemonHomes {
  /** Real paths of every running daemon's TEND_HOME (this one's included) and the default home. */
  homes: () => string[]
  /** Where the daemons register their homes. */
  registry: string
}

/**
 * Every tend home (this daemon's, the default one, every running daemon's) and the secret paths,
 * each as its real path: a mask or a refusal on a symlink's own path would miss what it leads to.
 */
export function protectedView(config: Readonly<DaemonConfig>, daemons: DaemonHomes): ProtectedView {
  const homes = new Set<string>()
  for (const home of [config.layout.home, resolveHome({ ...config.baseEnv, TEND_HOME: undefined }), ...daemons.homes()]) {
    const real = realOrNull(home)
    if (real) homes.add(real)
  }
  const secrets = new Set<string>()
  for (const path of secretPaths(config.baseEnv.HOME)) {
    const real = realOrNull(path)
    if (real) secrets.add(real)
  }
  const registry = realOrNull(daemons.registry)
  return {
    places: [
      ...[...homes].map((path) => ({ path, what: 'a tend home (TEND_HOME: sockets, spool, logs)' })),
      ...(registry ? [{ path: registry, what: "tend's registry of daemon homes" }] : []),
      ...[...secrets].map((path) => ({ path, what: 'a masked secret path' })),
    ],
    masks: [...homes, ...secrets],
  }
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
