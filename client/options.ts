import { homeLayout, resolveHome, type HomeLayout } from '../protocol/index.js'

export interface TendClientOptions {
  /** State folder; default from TEND_HOME, else $XDG_STATE_HOME/tend, else ~/.local/state/tend. */
  home?: string
  /** Start a daemon when none answers. Default true. */
  autoStart?: boolean
  /** How long to wait for an auto-started daemon to answer, in milliseconds. Default 10000. */
  startTimeoutMs?: number
  /** Environment the client reads TEND_HOME from and hands an auto-started daemon. Default process.env. */
  env?: Record<string, string | undefined>
  /**
   * Act for one owner (an agent session): the daemon then shows, reads, waits on, kills and
   * removes only that owner's tasks, and starts tasks for it. Default: none (the operator).
   */
  owner?: string
}

export interface NormalizedClientOptions {
  layout: HomeLayout
  autoStart: boolean
  startTimeoutMs: number
  env: Record<string, string | undefined>
  owner: string | null
}

/** Fills the client's defaults once; the only place the client reads process.env. */
export function normalizeClientOptions(options: TendClientOptions = {}): NormalizedClientOptions {
  const env = options.env ?? process.env
  const home = options.home ?? resolveHome(env)
  return {
    layout: homeLayout(home),
    autoStart: options.autoStart ?? true,
    startTimeoutMs: options.startTimeoutMs ?? 10_000,
    env: { ...env, TEND_HOME: home },
    owner: options.owner ?? null,
  }
}
