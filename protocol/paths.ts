import { homedir } from 'node:os'
import { join, resolve } from 'node:path'

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
  }
}
