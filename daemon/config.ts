import { execFileSync } from 'node:child_process'
import type { ErrorObject, ValidateFunction } from 'ajv'
import { isIP } from 'node:net'
import { parseAllowEntry, parseAllowList } from './network/allowlist.js'
import { Type, type Static } from 'typebox'
import { compileValidator } from './precompiled/schema-code.js'
import {
  checkSocketPath,
  homeLayout,
  isTendError,
  parseDuration,
  parseSize,
  redactRedisUrl,
  resolveHome,
  TendError,
  type HomeLayout,
} from '../protocol/index.js'
import { CLUSTER_CREDENTIAL_VARIABLES, CLUSTER_SETTINGS, CLUSTER_VARIABLES, checkClusterSettings } from './cluster/settings.js'
import { checkHomeFolder, readOwnConfigFile } from './store/home-safety.js'
import { requireDaemonProgram } from './daemon-programs.js'
import { DEFAULT_SETUP_WAIT_MS, MAX_SETUP_WAIT_MS } from './spawn/spawner.js'
import { delimiter } from 'node:path'
import { safePathEntries, type SkippedPathEntry } from '../protocol/program-folders.js'

const GiB = 1024 ** 3

/** Every daemon setting, its default and its unit. config.json in TEND_HOME may set any of them. */
export const DaemonSettingsSchema = Type.Object(
  {
    /** Tasks running at once, across all owners. Default 8. */
    concurrency: Type.Integer({ minimum: 1, maximum: 1024, default: 8 }),
    /** Tasks one owner may have running at once. Default 4. */
    perOwnerConcurrency: Type.Integer({ minimum: 1, maximum: 1024, default: 4 }),
    /** Ports of `--port auto`'s range one owner's tasks not ended may hold at once (queued ones too). Default 64. */
    perOwnerAutoPorts: Type.Integer({ minimum: 1, maximum: 10_000, default: 64 }),
    /** Default output cap per task, in bytes. Default 1 GiB. */
    maxOutputBytes: Type.Integer({ minimum: 1, default: GiB }),
    /** Spool-wide quota in bytes; past it the oldest finished tasks are deleted. Default 10 GiB. */
    spoolQuotaBytes: Type.Integer({ minimum: 1, default: 10 * GiB }),
    /**
     * Disk kept in reserve beside the spool (the file spool-reserve in TEND_HOME), in bytes: given
     * up when a task's record finds the disk full, so that the record lands, and made again once
     * there is room. 0 keeps none. Default 1 MiB.
     */
    spoolReserveBytes: Type.Integer({ minimum: 0, maximum: GiB, default: 1024 * 1024 }),
    /** Time between TERM and KILL when a task is stopped, in milliseconds. Default 3000. */
    killGraceMs: Type.Integer({ minimum: 0, default: 3000 }),
    /**
     * How long bubblewrap may take to set a sandbox up where the daemon waits for its setup (masks
     * mounted by path: a daemon that is not root), in milliseconds; past it the task fails, saying
     * so. Default 30000.
     */
    setupWaitMs: Type.Integer({ minimum: 1, maximum: MAX_SETUP_WAIT_MS, default: DEFAULT_SETUP_WAIT_MS }),
    /** How often running tasks' output sizes are checked against their caps, in milliseconds. Default 200. */
    outputCheckIntervalMs: Type.Integer({ minimum: 10, maximum: 60_000, default: 200 }),
    /** Sandbox profile of tasks that do not ask for one: off, workspace or strict. Default workspace. */
    sandbox: Type.Union([Type.Literal('off'), Type.Literal('workspace'), Type.Literal('strict')], { default: 'workspace' }),
    /** Absolute paths every sandboxed task may write besides its cwd. Default none. */
    writablePaths: Type.Array(Type.String({ pattern: '^/' }), { default: [] }),
    /**
     * Destinations tasks with network `allow` reach through tend's egress proxy: domain patterns
     * (`registry.example`, `*.example.org`) or public addresses, each with an optional `:port`
     * (none: 80 and 443). Default none.
     */
    networkAllow: Type.Array(Type.String(), { default: [] }),
    /**
     * Names the egress proxy resolves itself, to these addresses (`{"registry.internal": "10.0.0.5"}`):
     * internal hosts, and tests. A name mapped here may lead to an internal address; it is still
     * reached only where networkAllow allows it. Default none.
     */
    networkHosts: Type.Record(Type.String(), Type.String(), { default: {} }),
    /**
     * What a sandboxed task's private /tmp, /dev/shm and ~/.cache hold together, in bytes: half for
     * /tmp, a quarter each for the other two. Default 1 GiB.
     */
    tmpSizeBytes: Type.Integer({ minimum: 1024 * 1024, default: GiB }),
    /** Open-file limit of every task. Default 4096. */
    openFilesLimit: Type.Integer({ minimum: 64, default: 4096 }),
    /** Largest file a task may write, in bytes (RLIMIT_FSIZE). Default 16 GiB. */
    fileSizeLimitBytes: Type.Integer({ minimum: 1024 * 1024, default: 16 * GiB }),
    /** Memory limit of strict tasks that give none, in bytes. Default 2 GiB. */
    strictMemoryBytes: Type.Integer({ minimum: 1024 * 1024, default: 2 * GiB }),
    /** Process-count limit of strict tasks that give none. Default 512. */
    strictPidsMax: Type.Integer({ minimum: 1, default: 512 }),
    /** Process-count limit of workspace tasks that give none, where cgroups can enforce it. Default 4096. */
    workspacePidsMax: Type.Integer({ minimum: 1, maximum: 4_194_304, default: 4096 }),
    /**
     * tend's folder in each cgroup v1 controller: task groups are /sys/fs/cgroup/<controller>/<name>/<daemon uid>/home-<hash>/<task id>.
     * Default tend.
     */
    cgroupName: Type.String({ pattern: '^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$', default: 'tend' }),
    /**
     * The cgroup v2 subtree the daemon makes its task groups in (one per task, in a folder per
     * daemon): `own`, the daemon's own cgroup, which its service manager delegated (a systemd unit
     * with Delegate=yes; the daemon moves itself to its leaf `daemon`), or an absolute folder on the
     * cgroup2 mount that the operator delegated to the daemon's uid. Default null: none, cgroup v1.
     */
    cgroupRoot: Type.Union([Type.Null(), Type.Literal('own'), Type.String({ pattern: '^/' })], { default: null }),
    /**
     * Process-count limit of all the daemon's tasks together, where cgroups are available: no
     * number of tasks at their own limits can take the host's last pids. Default null: half of the
     * kernel's pid_max (or threads-max, if smaller), the rest left to the host.
     */
    daemonPidsMax: Type.Union([Type.Null(), Type.Integer({ minimum: 1, maximum: 4_194_304 })], { default: null }),
    /**
     * How tasks are started: native (a small C helper forks them, fast), node (child_process from the
     * daemon's own thread) or auto (native when the helper was built at install). Default auto.
     */
    spawner: Type.Union([Type.Literal('auto'), Type.Literal('native'), Type.Literal('node')], { default: 'auto' }),
    /**
     * Run every task as this user (a name or a numeric uid) instead of the daemon's: for a root
     * daemon that wants its tasks unprivileged outside the sandbox too. Default null (the daemon's).
     */
    taskUser: Type.Union([Type.Null(), Type.String({ minLength: 1, pattern: '^[A-Za-z0-9._][A-Za-z0-9._-]*$' })], { default: null }),
    /**
     * Give tasks PYTHONUNBUFFERED=1 (a task's own env value wins): Python writes its output as it
     * prints, not in 8 KiB blocks, to the spool file it does not see as a terminal. Default true.
     */
    pythonUnbuffered: Type.Boolean({ default: true }),
    /** Serve the operator console (and the API over TCP, with a token) from the start. Default false: `tend console` starts it. */
    console: Type.Boolean({ default: false }),
    /** Address the console binds. Another than loopback needs consoleTlsCert and consoleTlsKey, or consoleInsecure. Default 127.0.0.1. */
    consoleHost: Type.String({ minLength: 1, maxLength: 255, default: '127.0.0.1' }),
    /** The console's TCP port; 0 takes a free one. Default 0. */
    consolePort: Type.Integer({ minimum: 0, maximum: 65535, default: 0 }),
    /** PEM certificate (chain) of the console's TLS, an absolute path. Default null (no TLS). */
    consoleTlsCert: Type.Union([Type.Null(), Type.String({ pattern: '^/' })], { default: null }),
    /** PEM private key of the console's TLS, an absolute path. Default null. */
    consoleTlsKey: Type.Union([Type.Null(), Type.String({ pattern: '^/' })], { default: null }),
    /** Serve an address other than loopback without TLS. Default false. */
    consoleInsecure: Type.Boolean({ default: false }),
    ...CLUSTER_SETTINGS,
    /** pino log level. Default info. */
    logLevel: Type.Union(
      ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((level) => Type.Literal(level)),
      { default: 'info' },
    ),
  },
  { additionalProperties: false },
)
export type DaemonSettings = Static<typeof DaemonSettingsSchema>

export interface DaemonConfig extends DaemonSettings {
  layout: HomeLayout
  /**
   * The environment tasks start from (the daemon's own, captured once), its PATH only the folders
   * no one but root or the daemon's uid can change: a task that does not choose its PATH runs
   * programs found there, as the daemon's uid with --sandbox off.
   */
  baseEnv: Readonly<Record<string, string>>
  /** The daemon's PATH entries left out of baseEnv and of its own lookups, and why (status, the start log). */
  pathSkipped: readonly SkippedPathEntry[]
  /** taskUser resolved to ids (null: tasks run as the daemon's user). */
  taskIdentity: { uid: number; gid: number } | null
  /**
   * NOTIFY_SOCKET: where the service manager that started the daemon (systemd, Type=notify) hears
   * READY=1 and STOPPING=1 (daemon/service/). null: none did. Never passed on to tasks.
   */
  notifySocket: string | null
}

const ENV_SETTINGS: Record<string, { key: keyof DaemonSettings; parse: (text: string) => unknown }> = {
  TEND_CONCURRENCY: { key: 'concurrency', parse: Number },
  TEND_PER_OWNER_CONCURRENCY: { key: 'perOwnerConcurrency', parse: Number },
  TEND_PER_OWNER_AUTO_PORTS: { key: 'perOwnerAutoPorts', parse: Number },
  TEND_MAX_OUTPUT: { key: 'maxOutputBytes', parse: parseSize },
  TEND_SPOOL_QUOTA: { key: 'spoolQuotaBytes', parse: parseSize },
  TEND_SPOOL_RESERVE: { key: 'spoolReserveBytes', parse: parseSize },
  TEND_KILL_GRACE: { key: 'killGraceMs', parse: parseDuration },
  TEND_SETUP_WAIT: { key: 'setupWaitMs', parse: parseDuration },
  TEND_OUTPUT_CHECK_INTERVAL: { key: 'outputCheckIntervalMs', parse: parseDuration },
  TEND_LOG_LEVEL: { key: 'logLevel', parse: String },
  TEND_SANDBOX: { key: 'sandbox', parse: String },
  TEND_SPAWNER: { key: 'spawner', parse: String },
  TEND_TASK_USER: { key: 'taskUser', parse: String },
  TEND_WRITABLE_PATHS: { key: 'writablePaths', parse: (text) => text.split(':').filter(Boolean) },
  TEND_NETWORK_ALLOW: {
    key: 'networkAllow',
    parse: (text) =>
      text
        .split(',')
        .map((entry) => entry.trim())
        .filter(Boolean),
  },
  TEND_NETWORK_HOSTS: { key: 'networkHosts', parse: parseHostsList },
  TEND_CGROUP_NAME: { key: 'cgroupName', parse: String },
  TEND_CGROUP_ROOT: { key: 'cgroupRoot', parse: String },
  TEND_DAEMON_PIDS_MAX: { key: 'daemonPidsMax', parse: Number },
  TEND_PYTHON_UNBUFFERED: { key: 'pythonUnbuffered', parse: parseSwitch },
  TEND_CONSOLE: { key: 'console', parse: parseSwitch },
  TEND_CONSOLE_HOST: { key: 'consoleHost', parse: String },
  TEND_CONSOLE_PORT: { key: 'consolePort', parse: Number },
  TEND_CONSOLE_TLS_CERT: { key: 'consoleTlsCert', parse: String },
  TEND_CONSOLE_TLS_KEY: { key: 'consoleTlsKey', parse: String },
  TEND_CONSOLE_INSECURE: { key: 'consoleInsecure', parse: parseSwitch },
  ...CLUSTER_VARIABLES,
}

/** Variables that hold credentials: never shown in a message, never handed to a task. */
const CREDENTIAL_VARIABLES = new Set([...CLUSTER_CREDENTIAL_VARIABLES, 'TEND_TOKEN'])

/**
 * The daemon's own, kept out of tasks' environment: a task that notified the daemon's service
 * manager would speak for the daemon (systemd hears only the main pid, NotifyAccess=main; another
 * manager might not check).
 */
const DAEMON_ONLY_VARIABLES = new Set(['NOTIFY_SOCKET'])

/** 1/true/yes or 0/false/no, as an environment variable writes a switch. */
/** TEND_NETWORK_HOSTS: `name=address` pairs, separated by commas. */
function parseHostsList(text: string): Record<string, string> {
  const hosts: Record<string, string> = {}
  for (const pair of text
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean)) {
    const equals = pair.indexOf('=')
    if (equals <= 0) throw new Error(`expected name=address pairs separated by commas, got ${JSON.stringify(pair)}`)
    hosts[pair.slice(0, equals).trim()] = pair.slice(equals + 1).trim()
  }
  return hosts
}

/** Each networkAllow pattern parses, and networkHosts maps domain names to IP addresses. */
function checkNetworkSettings(settings: DaemonSettings, sources: Map<string, string>, problems: string[]): void {
  const source = (key: string) => sources.get(key) ?? key
  for (const problem of parseAllowList(settings.networkAllow, 'networkAllow').problems) problems.push(`${source('networkAllow')}: ${problem}`)
  for (const [name, address] of Object.entries(settings.networkHosts)) {
    const entry = parseAllowEntry(name)
    if ('problem' in entry || entry.kind !== 'domain' || entry.wildcard || name.includes(':'))
      problems.push(`${source('networkHosts')}: networkHosts/${name}: expected a domain name (no wildcard, no port), e.g. "registry.internal"`)
    else if (isIP(address) === 0)
      problems.push(`${source('networkHosts')}: networkHosts/${name}: expected an IPv4 or IPv6 address, got ${JSON.stringify(address)}`)
  }
}

function parseSwitch(text: string): boolean {
  if (/^(1|true|yes|on)$/i.test(text)) return true
  if (/^(0|false|no|off)$/i.test(text)) return false
  throw new Error(`expected 1 or 0 (true or false), got ${JSON.stringify(text)}`)
}

/**
 * Reads the daemon's configuration once: defaults, then TEND_HOME/config.json, then TEND_*
 * environment variables. Lists every violation at once, and freezes the result.
 */
export function loadDaemonConfig(env: Record<string, string | undefined> = process.env): Readonly<DaemonConfig> {
  const layout = homeLayout(resolveHome(env))
  checkSocketPath(layout.socket)
  // The home first: a config.json is only as safe as the folder that holds it.
  checkHomeFolder(layout.home, process.geteuid!())
  const fromFile = readConfigFile(layout.config)
  const fromEnv: Record<string, unknown> = {}
  /** Where each setting came from, so a violation names the variable or file the user wrote. */
  const sources = new Map<string, string>(Object.keys(fromFile).map((key) => [key, `${layout.config} "${key}"`]))
  const problems: string[] = []
  for (const [name, { key, parse }] of Object.entries(ENV_SETTINGS)) {
    const text = env[name]
    if (text === undefined || text === '') continue
    sources.set(key, `${name}=${CREDENTIAL_VARIABLES.has(name) ? redactRedisUrl(text) : text}`)
    try {
      fromEnv[key] = parse(text)
    } catch (error) {
      problems.push(`${name}: ${(error as Error).message}`)
    }
  }
  for (const key of Object.keys(fromFile)) {
    if (!(key in DaemonSettingsSchema.properties))
      problems.push(`${sources.get(key)}: unknown setting (known: ${Object.keys(DaemonSettingsSchema.properties).join(', ')})`)
  }
  const known = Object.fromEntries(Object.entries({ ...fromFile, ...fromEnv }).filter(([key]) => key in DaemonSettingsSchema.properties))
  // ajv fills the defaults in place (useDefaults), on a copy.
  const settings = structuredClone(known) as unknown
  const seen = new Set<string>()
  // The most telling error of each setting first: for a value that may be null or a string of some
  // shape, "must match pattern" says more than "must be null".
  for (const error of [...settingsErrors(settings)].sort((a, b) => telling(a) - telling(b))) {
    const key = error.instancePath.replace(/^\//, '')
    if (seen.has(key)) continue
    seen.add(key)
    problems.push(`${sources.get(key) ?? sources.get(key.split('/')[0]!) ?? key}: ${key} ${settingProblem(error)}`)
  }
  if (problems.length === 0) checkClusterSettings(settings as DaemonSettings, sources, problems)
  if (problems.length === 0) checkNetworkSettings(settings as DaemonSettings, sources, problems)
  const taskUser = (settings as DaemonSettings).taskUser
  const taskIdentity = problems.length === 0 && taskUser !== null ? resolveUser(taskUser, sources.get('taskUser') ?? 'taskUser', problems) : null
  if (problems.length > 0) throw new TendError('TEND_ERR_CONFIG_INVALID', { detail: problems.join('; ') })
  const baseEnv = Object.fromEntries(
    Object.entries(env).filter(
      (entry): entry is [string, string] => entry[1] !== undefined && !CREDENTIAL_VARIABLES.has(entry[0]) && !DAEMON_ONLY_VARIABLES.has(entry[0]),
    ),
  )
  const path = env.PATH === undefined ? null : safePathEntries(env.PATH, process.geteuid!())
  if (path) baseEnv.PATH = path.entries.join(delimiter)
  return Object.freeze({
    ...(settings as DaemonSettings),
    layout,
    baseEnv: Object.freeze(baseEnv),
    pathSkipped: Object.freeze(path?.skipped ?? []),
    taskIdentity: taskIdentity && Object.freeze(taskIdentity),
    notifySocket: env.NOTIFY_SOCKET || null,
  })
}

/** The settings' violations, defaults filled in first. The validator is built once, when first needed. */
let validateSettings: ValidateFunction | undefined
function settingsErrors(settings: unknown): ErrorObject[] {
  validateSettings ??= compileValidator('settings', DaemonSettingsSchema)
  return validateSettings(settings) ? [] : (validateSettings.errors ?? [])
}

/** Errors that say what a value must be come before the ones that only say what it is not. */
function telling(error: ErrorObject): number {
  if (['pattern', 'minimum', 'maximum', 'minLength', 'maxLength', 'additionalProperties'].includes(error.keyword)) return 0
  return error.keyword === 'anyOf' ? 1 : 2
}

/** ajv's words, except for a choice among names: those are listed. */
function settingProblem(error: ErrorObject): string {
  if (error.keyword === 'const' || error.keyword === 'anyOf') {
    const choices = choicesOf(error.instancePath.replace(/^\//, ''))
    if (choices) return `must be one of ${choices.join(', ')}`
  }
  return error.message ?? error.keyword
}

function choicesOf(key: string): string[] | null {
  const schema = (DaemonSettingsSchema.properties as Record<string, { anyOf?: Array<{ const?: unknown }> }>)[key]
  const consts = schema?.anyOf?.map((branch) => branch.const)
  return consts && consts.every((value) => typeof value === 'string') ? (consts as string[]) : null
}

/** A user name or uid as the system's user database knows it (id(1) asks NSS, not just /etc/passwd). */
function resolveUser(user: string, source: string, problems: string[]): { uid: number; gid: number } | null {
  try {
    const id = requireDaemonProgram('id')
    const uid = Number(execFileSync(id, ['-u', user], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 5000 }).trim())
    const gid = Number(execFileSync(id, ['-g', user], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 5000 }).trim())
    if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error('id printed no number')
    return { uid, gid }
  } catch (error) {
    problems.push(
      `${source}: taskUser ${JSON.stringify(user)} is not a user of this machine (` +
        `${((error as { stderr?: string }).stderr ?? (error as Error).message).trim()})`,
    )
    return null
  }
}

/**
 * config.json, read only when no one but the daemon's uid can change it (store/home-safety.ts):
 * TEND_ERR_HOME_UNSAFE otherwise, before a byte of it is read.
 */
function readConfigFile(path: string): Record<string, unknown> {
  let text: string | null
  try {
    text = readOwnConfigFile(path, process.geteuid!())
  } catch (error) {
    if (isTendError(error)) throw error
    throw new TendError('TEND_ERR_CONFIG_INVALID', { detail: `${path}: ${(error as Error).message}` })
  }
  if (text === null) return {}
  try {
    const parsed = JSON.parse(text) as unknown
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('expected a JSON object')
    return parsed as Record<string, unknown>
  } catch (error) {
    throw new TendError('TEND_ERR_CONFIG_INVALID', { detail: `${path}: ${(error as Error).message}` })
  }
}
