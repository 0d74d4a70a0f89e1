import { isAbsolute } from 'node:path'
import { pathToFileURL } from 'node:url'

/** Where a unit runs: the user's own service manager, or the system's (docs/service.md). */
export type ServiceScope = 'user' | 'system'

/** The unit's name in its folder. */
export const UNIT_NAME = 'tend.service'

export interface UnitFileOptions {
  scope: ServiceScope
  /** Absolute path of the node that runs the daemon (the installing one, process.execPath). */
  nodePath: string
  /** Absolute path of this copy's bin/tend.js. */
  tendBin: string
  /** The TEND_HOME the daemon serves: the installing user's, so that their `tend` reaches it. */
  home: string
  /** PATH for the daemon and its tasks (a service manager's own is minimal): service-files.ts says which. */
  path: string
  /** Type=notify (the daemon has its service-notify addon), else Type=exec. */
  notify: boolean
  /** Absolute path of docs/service.md, for Documentation=. */
  docs: string
  /** A system unit's User=: who the daemon runs as. Not for a user unit (it runs as its user). */
  user?: string
}

/**
 * The text of tend's unit, from options alone (no file or environment read): each choice is
 * explained in docs/service.md, which the unit names. Throws when a value has a line break (it
 * would add lines of its own to the unit) or a path is not absolute.
 */
export function createUnitFile(options: UnitFileOptions): string {
  validateUnitFileOptions(options)
  const system = options.scope === 'system'
  const lines = [
    `# tend's daemon as a systemd ${options.scope} service, written by \`tend service install\`.`,
    `# Each choice below is explained in ${options.docs}.`,
    '[Unit]',
    'Description=tend, a sandboxed background-task daemon for AI agents',
    `Documentation=${escapeSpecifiers(pathToFileURL(options.docs).href)}`,
    ...(system ? ['After=network.target'] : []),
    '',
    '[Service]',
    ...(options.notify
      ? ['Type=notify', 'NotifyAccess=main']
      : ['# Type=exec: the service-notify addon was not built, so the daemon cannot send READY=1.', 'Type=exec']),
    `ExecStart=${[options.nodePath, options.tendBin].map(quoteUnitWord).join(' ')} daemon`,
    environment('TEND_HOME', options.home),
    // The unit's own cgroup, which Delegate=yes hands to the daemon, holds its task groups on cgroup v2.
    environment('TEND_CGROUP_ROOT', 'own'),
    environment('PATH', options.path),
    ...(system && options.user !== undefined ? [`User=${options.user}`] : []),
    'Delegate=yes',
    'KillMode=process',
    'Restart=on-failure',
    'RestartSec=2s',
    'RestartPreventExitStatus=2',
    'TimeoutStopSec=60s',
    'OOMPolicy=continue',
    'TasksMax=infinity',
    '',
    '[Install]',
    `WantedBy=${system ? 'multi-user.target' : 'default.target'}`,
    '',
  ]
  return lines.join('\n')
}

/** One word of an ExecStart= line: quoted when it has to be, its specifiers (%) and variables ($) escaped. */
export function quoteUnitWord(word: string): string {
  const escaped = escapeSpecifiers(word).replace(/\$/g, '$$$$')
  return /[\s"'\\]/.test(escaped) ? quoted(escaped) : escaped
}

/** An Environment= line: quoted whole, its specifiers escaped ($ is not expanded there). */
function environment(name: string, value: string): string {
  return `Environment=${quoted(escapeSpecifiers(`${name}=${value}`))}`
}

/** In double quotes, its backslashes and double quotes escaped. */
function quoted(text: string): string {
  return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`
}

/** systemd expands %x specifiers in most settings: a literal % is %%. */
function escapeSpecifiers(text: string): string {
  return text.replace(/%/g, '%%')
}

function validateUnitFileOptions(options: UnitFileOptions): void {
  const fields = ['nodePath', 'tendBin', 'home', 'path', 'docs', 'user'] as const
  for (const field of fields) {
    const value = options[field]
    if (value !== undefined && /[\n\r\0]/.test(value))
      throw new Error(`${field} has a line break or NUL, which would end its line of the unit: ${JSON.stringify(value)}`)
  }
  for (const field of ['nodePath', 'tendBin', 'home', 'docs'] as const) {
    if (!isAbsolute(options[field])) throw new Error(`${field} must be an absolute path, got ${JSON.stringify(options[field])}`)
  }
  if (options.user !== undefined && !/^([a-z_][a-z0-9_.-]*\$?|\d+)$/i.test(options.user))
    throw new Error(`user is not a user name: ${JSON.stringify(options.user)}`)
}
