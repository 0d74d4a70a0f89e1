import { createRequire } from 'node:module'
import { closeSync, constants, fsyncSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { TendError } from '../../protocol/index.js'
import { findNativeArtifact } from '../../protocol/native-places.js'
import { safePath } from '../../protocol/program-folders.js'
import { cliEntry, packageRoot } from '../package-root.js'
import { createUnitFile, type ServiceScope } from './unit-file.js'

/**
 * Whether the daemon of this copy can tell systemd it is ready: its addon has the service-notify
 * part (daemon/service/sd-notify.c). Checked here, not by the daemon, because the unit's Type=
 * depends on it: a Type=notify daemon that never notifies is killed when its start times out. The
 * addon is the one the daemon loads (protocol/native-places.ts).
 */
function daemonCanNotify(): boolean {
  const addon = findNativeArtifact('tend.node')
  if (addon === null) return false
  try {
    const loaded = createRequire(import.meta.url)(addon.path) as { serviceNotify?: { notify?: unknown } }
    return typeof loaded.serviceNotify?.notify === 'function'
  } catch {
    return false
  }
}

/**
 * A system unit's PATH: the system's folders and nothing else. The daemon runs as root or as a
 * user of the installer's choice, and the installer's PATH (from npm: node_modules/.bin of every
 * folder above the project) may name folders that other users can write. ExecStart names node and
 * tend by absolute path: this PATH is only for the programs the daemon and its tasks look up.
 */
const SYSTEM_UNIT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

/**
 * A user unit's PATH: the installer's, but only the folders that no one other than root or the
 * installer can change (protocol/program-folders.ts); the system's if none is left.
 */
function userUnitPath(path: string | undefined): string {
  return safePath(path, process.getuid!()) || SYSTEM_UNIT_PATH
}

/** The unit for this copy of tend, its node and the installing user's home, PATH (see above) and name. */
export function unitForThisCopy(scope: ServiceScope, home: string, env: Record<string, string | undefined>, user: string): string {
  try {
    return createUnitFile({
      scope,
      nodePath: process.execPath,
      tendBin: cliEntry(),
      home,
      path: scope === 'system' ? SYSTEM_UNIT_PATH : userUnitPath(env.PATH),
      notify: daemonCanNotify(),
      docs: join(packageRoot(), 'docs', 'service.md'),
      ...(scope === 'system' ? { user } : {}),
    })
  } catch (error) {
    throw new TendError('TEND_ERR_SERVICE_FAILED', { action: 'written', detail: (error as Error).message }, { cause: error })
  }
}

/** Writes the unit whole (a temporary file fsynced, then renamed over), 0644 as systemd's own. */
export function writeUnitFile(path: string, text: string): void {
  const temporary = `${path}.tend-${process.pid}`
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o755 })
    const fd = openSync(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644)
    try {
      writeSync(fd, text)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    renameSync(temporary, path)
  } catch (error) {
    rmSync(temporary, { force: true })
    const detail = `${path} could not be written: ${(error as Error).message}${permissionHint(error, 'install')}`
    throw new TendError('TEND_ERR_SERVICE_FAILED', { action: 'installed', detail }, { cause: error })
  }
}

/** Removes the unit (none there is fine). */
export function removeUnitFile(path: string): void {
  try {
    rmSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return
    const detail = `${path} could not be removed: ${(error as Error).message}${permissionHint(error, 'uninstall')}`
    throw new TendError('TEND_ERR_SERVICE_FAILED', { action: 'removed', detail }, { cause: error })
  }
}

/** The usual reason a unit folder refuses: the system's is root's. */
function permissionHint(error: unknown, verb: 'install' | 'uninstall'): string {
  const { code } = error as NodeJS.ErrnoException
  return code === 'EACCES' || code === 'EPERM' ? ` (a --system unit is root's: \`sudo tend service ${verb} --system\`, or --user for your own)` : ''
}
