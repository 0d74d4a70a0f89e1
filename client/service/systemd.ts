import { spawnSync } from 'node:child_process'
import { statSync } from 'node:fs'
import { homedir } from 'node:os'
import { isAbsolute, join } from 'node:path'
import { TendError } from '../../protocol/index.js'
import { findSafeProgram } from '../../protocol/program-folders.js'
import type { ServiceScope } from './unit-file.js'

/** Where a running systemd says it is the init (sd_booted(3) looks there too). */
export const SYSTEMD_RUNTIME_DIR = '/run/systemd/system'

/** How long one systemctl call may take: `enable --now` waits for the daemon's READY=1. */
const SYSTEMCTL_TIMEOUT_MS = 120_000

/** The machine's systemd as `tend service` uses it; the paths are options for its tests. */
export interface SystemdHost {
  /** PATH to find systemctl on. */
  path: string
  /** SYSTEMD_RUNTIME_DIR unless a test gives another. */
  runtimeDir: string
}

/**
 * systemctl's absolute path on `path`, or null: only in a folder that no one but root or this user
 * can change (protocol/program-folders.ts). `sudo tend service install` runs it as root, and npm
 * puts node_modules/.bin of every folder above the project first on PATH.
 */
function findSystemctl(path: string): string | null {
  return findSafeProgram('systemctl', path, process.getuid!())
}

/** systemctl, once systemd is known to run here; TEND_ERR_SERVICE_UNAVAILABLE naming what is missing otherwise. */
export function requireSystemd(host: SystemdHost): string {
  const systemctl = findSystemctl(host.path)
  if (systemctl === null) throw new TendError('TEND_ERR_SERVICE_UNAVAILABLE', { detail: `systemctl was not found on PATH (${host.path})` })
  let booted = false
  try {
    booted = statSync(host.runtimeDir).isDirectory()
  } catch {
    booted = false
  }
  if (!booted) throw new TendError('TEND_ERR_SERVICE_UNAVAILABLE', { detail: `systemd is not this machine's init (${host.runtimeDir} is missing)` })
  return systemctl
}

/**
 * Runs `systemctl [--user] ARGS`; TEND_ERR_SERVICE_FAILED with what it printed when it fails.
 * `action` says what the failure kept from happening ("installed", "removed").
 */
export function runSystemctl(systemctl: string, scope: ServiceScope, args: string[], env: Record<string, string | undefined>, action: string): void {
  const argv = [...(scope === 'user' ? ['--user'] : []), ...args]
  const run = spawnSync(systemctl, argv, { env: env as NodeJS.ProcessEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: SYSTEMCTL_TIMEOUT_MS })
  if (run.error || run.status !== 0) {
    const printed = `${run.stderr ?? ''}${run.stdout ?? ''}`.trim()
    const how = run.error ? run.error.message : run.signal ? `ended by ${run.signal}` : `exited with ${run.status}`
    throw new TendError('TEND_ERR_SERVICE_FAILED', { action, detail: `systemctl ${argv.join(' ')} ${how}${printed ? `: ${printed}` : ''}` })
  }
}

/**
 * Where a unit of `scope` goes: the system's administrator folder, or the user's own
 * ($XDG_CONFIG_HOME/systemd/user, else ~/.config/systemd/user), as systemd.unit(5) lists them.
 */
export function unitFolder(scope: ServiceScope, env: Record<string, string | undefined>): string {
  if (scope === 'system') return '/etc/systemd/system'
  const config = env.XDG_CONFIG_HOME && isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : join(env.HOME || homedir(), '.config')
  return join(config, 'systemd', 'user')
}
