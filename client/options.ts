import { readFileSync } from 'node:fs'
import { socketEndpoint, tcpEndpoint, type DaemonEndpoint } from './endpoint.js'
import { checkSocketPath, formatDuration, homeLayout, parseDuration, resolveHome, TendError, type HomeLayout } from '../protocol/index.js'

/** Default request timeout: how long a request may wait for the daemon's answer, in milliseconds. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000
/** The longest timer Node keeps (about 24.8 days); longer ones would fire at once. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1

export interface TendClientOptions {
  /** State folder; default from TEND_HOME, else $XDG_STATE_HOME/tend, else ~/.local/state/tend. */
  home?: string
  /** Start a daemon when none answers. Default true. */
  autoStart?: boolean
  /** How long to wait for an auto-started daemon to answer, in milliseconds. Default 10000. */
  startTimeoutMs?: number
  /**
   * How long one request may take, connecting and answering, in milliseconds, before it fails with
   * TEND_ERR_DAEMON_TIMEOUT (a daemon that accepts connections but does not answer is wedged).
   * Long-polls add their own wait: `read` its `waitMs`, `wait` each chunk of its timeout, `kill`
   * its `graceMs`. Default TEND_REQUEST_TIMEOUT (a duration such as `30s`), else 30000.
   */
  requestTimeoutMs?: number
  /** Environment the client reads TEND_HOME and TEND_REQUEST_TIMEOUT from and hands an auto-started daemon. Default process.env. */
  env?: Record<string, string | undefined>
  /**
   * Act for one owner (an agent session): the daemon then shows, reads, waits on, kills and
   * removes only that owner's tasks, and starts tasks for it. Default: none (the operator).
   */
  owner?: string
  /**
   * Talk to a daemon's console listener over TCP instead of the local socket: `http(s)://host:port`,
   * as `tend console` prints it (without the token). Default TEND_URL; unset: the socket. A
   * remote daemon is never started by the client.
   */
  url?: string
  /** The console's token, sent as `Authorization: Bearer`. Default TEND_TOKEN. */
  token?: string
  /** PEM certificate(s) to trust for an https url with a certificate of its own. Default: the file TEND_CA_FILE names. */
  ca?: string
}

export interface NormalizedClientOptions {
  layout: HomeLayout
  autoStart: boolean
  startTimeoutMs: number
  requestTimeoutMs: number
  env: Record<string, string | undefined>
  owner: string | null
  /** The daemon's socket, or a console listener (url and token). */
  endpoint: DaemonEndpoint
}

/** Fills the client's defaults once; the only place the client reads process.env. */
export function normalizeClientOptions(options: TendClientOptions = {}): NormalizedClientOptions {
  const env = options.env ?? process.env
  const home = options.home ?? resolveHome(env)
  const layout = homeLayout(home)
  const url = options.url ?? (env.TEND_URL || undefined)
  if (url === undefined) checkSocketPath(layout.socket)
  const endpoint =
    url === undefined ? socketEndpoint(layout.socket) : tcpEndpoint(url, requiredToken(options.token ?? env.TEND_TOKEN), options.ca ?? readCa(env.TEND_CA_FILE))
  return {
    layout,
    endpoint,
    autoStart: url === undefined && (options.autoStart ?? true),
    startTimeoutMs: options.startTimeoutMs ?? 10_000,
    requestTimeoutMs: normalizeRequestTimeout(options.requestTimeoutMs, env.TEND_REQUEST_TIMEOUT),
    env: { ...env, TEND_HOME: home },
    owner: options.owner ?? null,
  }
}

function requiredToken(token: string | undefined): string {
  if (!token)
    throw new TendError('TEND_ERR_CONFIG_INVALID', { detail: 'a daemon URL (TEND_URL, url) needs its token (TEND_TOKEN, token): tend console prints both' })
  return token
}

function readCa(file: string | undefined): string | undefined {
  if (!file) return undefined
  try {
    return readFileSync(file, 'utf8')
  } catch (error) {
    throw new TendError('TEND_ERR_CONFIG_INVALID', { detail: `TEND_CA_FILE: ${(error as Error).message}` }, { cause: error })
  }
}

/** The option, else the variable, else the default; throws TEND_ERR_CONFIG_INVALID naming the one that is wrong. */
function normalizeRequestTimeout(option: number | undefined, variable: string | undefined): number {
  if (option !== undefined) {
    validateTimeout(option, `requestTimeoutMs: expected a number of milliseconds from 1 to ${MAX_TIMEOUT_MS}, got ${String(option)}`)
    return option
  }
  if (variable === undefined || variable === '') return DEFAULT_REQUEST_TIMEOUT_MS
  const expected = `TEND_REQUEST_TIMEOUT: expected a duration from 1ms to ${formatDuration(MAX_TIMEOUT_MS)} (500ms, 30s, 5m), got ${JSON.stringify(variable)}`
  let parsed: number
  try {
    parsed = parseDuration(variable)
  } catch (error) {
    throw new TendError('TEND_ERR_CONFIG_INVALID', { detail: expected }, { cause: error })
  }
  validateTimeout(parsed, expected)
  return parsed
}

function validateTimeout(value: number, message: string): void {
  if (!Number.isFinite(value) || value < 1 || value > MAX_TIMEOUT_MS) throw new TendError('TEND_ERR_CONFIG_INVALID', { detail: message })
}
