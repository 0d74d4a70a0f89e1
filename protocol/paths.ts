import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import { TendError } from './errors.js'

/** Where tend keeps its state: TEND_HOME, else $XDG_STATE_HOME/tend, else ~/.local/state/tend. */
export function resolveHome(env: Record<string, string | undefined>): string {
  if (env.TEND_HOME) return resolve(env.TEND_HOME)
  if (env.XDG_STATE_HOME) return resolve(env.XDG_STATE_HOME, 'tend')
  return join(homedir(), '.local', 'state', 'tend')
}

/**
 * The file every daemon keeps in its home (made at start): a folder that holds it is a tend home,
 * whoever made it and whether or not a registry knows it (docs/spool.md).
 */
export const HOME_MARKER = '.tend-home'

export interface HomeLayout {
  home: string
  /** HOME_MARKER in the home. */
  marker: string
  socket: string
  spool: string
  log: string
  config: string
  /** Where a daemon started in the background writes what it printed before its log opened. */
  startupLog: string
  /** The console's tokens (their SHA-256 digests), 0600. */
  consoleTokens: string
  /** The instance lock: a 0600 file its daemon holds flock(LOCK_EX) on for its whole life. */
  lock: string
}

export function homeLayout(home: string): HomeLayout {
  return {
    home,
    marker: join(home, HOME_MARKER),
    socket: join(home, 'tend.sock'),
    spool: join(home, 'spool'),
    log: join(home, 'daemon.log'),
    config: join(home, 'config.json'),
    startupLog: join(home, 'daemon.stderr'),
    consoleTokens: join(home, 'console-tokens.json'),
    lock: join(home, 'daemon.lock'),
  }
}

/** sun_path holds 108 bytes, its terminating NUL included: a longer path would be cut short. */
export const SOCKET_PATH_MAX_BYTES = 107

/**
 * Refuses a socket path a Unix socket address cannot hold (a deep TEND_HOME): bound or connected,
 * the kernel would use a truncated path, outside the home. A setting error, for daemon and client
 * alike, naming the path and the limit.
 */
export function checkSocketPath(path: string): void {
  const bytes = Buffer.byteLength(path)
  if (bytes <= SOCKET_PATH_MAX_BYTES) return
  throw new TendError('TEND_ERR_CONFIG_INVALID', {
    detail:
      `TEND_HOME: its socket ${path} is ${bytes}` +
      ` bytes long, and a Unix socket path holds at most ${SOCKET_PATH_MAX_BYTES} bytes; choose a shorter TEND_HOME`,
  })
}
