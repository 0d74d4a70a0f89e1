/**
 * What a sandboxed task's network reaches (docs/sandbox.md has the table):
 * - `loopback`: its owner's private namespace, only `lo`, shared by all of that owner's running
 *   sandboxed tasks (a server one starts, the others reach at 127.0.0.1:PORT); nothing else.
 * - `allow`: that loopback, plus egress through tend's proxy to the operator's allowlist.
 * - `host`: the host's network, whole (what `off` tasks always have).
 */
export const NETWORK_MODES = ['loopback', 'allow', 'host'] as const
export type NetworkMode = (typeof NETWORK_MODES)[number]
/** What a sandboxed task gets when it asks for nothing. */
export const DEFAULT_NETWORK: NetworkMode = 'loopback'

/**
 * A record's `network` as a mode: older records and older clients say `true` (the host's
 * network) or `false` (none beyond the task: today's `loopback` is the closest, and no wider).
 */
export function networkModeOf(value: NetworkMode | boolean): NetworkMode {
  if (value === true) return 'host'
  if (value === false) return 'loopback'
  return value
}

/** One destination the egress proxy refused a task, with how often. */
export interface BlockedDestination {
  /** The name (or address) the task asked for. */
  name: string
  port: number
  /** Why, in a few words: `not on the allowlist`, `resolves to a private address`, … */
  reason: string
  count: number
}

/** What a task did on the network through tend's proxy: counts, bytes, and what was refused. */
export interface NetworkUse {
  allowed: number
  blocked: number
  /** Bytes the task sent upstream and received from upstream, through allowed connections. */
  sentBytes: number
  receivedBytes: number
  /** The distinct destinations refused, most recent last (at most BLOCKED_DESTINATIONS_KEPT). */
  blockedDestinations: BlockedDestination[]
}
export const BLOCKED_DESTINATIONS_KEPT = 20

/** `name:port` as an agent and an operator read it (an IPv6 address in brackets). */
export function destinationLabel(destination: { name: string; port: number }): string {
  return destination.name.includes(':') ? `[${destination.name}]:${destination.port}` : `${destination.name}:${destination.port}`
}

/** How a connection reached the egress proxy: its HTTP proxy, a CONNECT tunnel, SOCKS5, a synthetic address (transparent), or a DNS query. */
export type NetworkVia = 'http' | 'connect' | 'socks' | 'transparent' | 'dns'

/** One line of a task's network.log: one decision of the egress proxy, written once the connection closed (or at once when refused). */
export interface NetworkDecision {
  time: string
  /** What the task asked for: a name, or an IP address. */
  name: string
  port: number
  via: NetworkVia
  decision: 'allowed' | 'blocked'
  /** Why it was refused, in a few words. */
  reason?: string
  /** The upstream address connected to, when one was. */
  address?: string
  /** Allowed, but the upstream could not be reached (ECONNREFUSED, ETIMEDOUT, …). */
  error?: string
  /** Bytes the task sent upstream, and received from it. */
  sentBytes: number
  receivedBytes: number
}

/** The spool file that holds a task's network decisions, one JSON line each. */
export const NETWORK_LOG_FILE = 'network.log'
