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
  /** Decisions counted here but left out of network.log because it had reached NETWORK_LOG_MAX_BYTES; absent when none. */
  logOmitted?: number
  /** Decisions counted here that network.log could not keep (a full or read-only disk, its folder gone); absent when none. */
  logLost?: number
}
export const BLOCKED_DESTINATIONS_KEPT = 20

/**
 * `name:port` as an agent and an operator read it (an IPv6 address in brackets). The name is what
 * the task asked for (a SOCKS5 or Host name can hold any byte): its control characters are shown
 * as `\uXXXX`, never sent to a terminal.
 */
export function destinationLabel(destination: { name: string; port: number }): string {
  // eslint-disable-next-line no-control-regex
  const name = destination.name.replace(/[\u0000-\u001f\u007f-\u009f]/g, (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`)
  return name.includes(':') ? `[${name}]:${destination.port}` : `${name}:${destination.port}`
}

/** How a connection reached the egress proxy: its HTTP proxy, a CONNECT tunnel, SOCKS5, a synthetic address (transparent), or a DNS query. */
export const NETWORK_VIAS = ['http', 'connect', 'socks', 'transparent', 'dns'] as const
export type NetworkVia = (typeof NETWORK_VIAS)[number]

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

/**
 * How large a task's network.log grows: decisions past it are counted in the record's networkUse
 * (exactly, `logOmitted`) but not listed, and one summary line `{"time", "omitted": N}` follows
 * when the task ends. 1 MiB is some 5000 decisions: what an operator reads, not a packet capture.
 */
export const NETWORK_LOG_MAX_BYTES = 1024 * 1024

/** Decisions per page of GET /v1/tasks/:id/network: by default, and at most. */
export const NETWORK_LOG_PAGE_DEFAULT = 500
export const NETWORK_LOG_PAGE_LIMIT = 5000

/** One page of a task's network.log (GET /v1/tasks/:id/network). */
export interface NetworkLogPage {
  entries: NetworkDecision[]
  /** Byte offset in network.log to read from next. */
  next: number
  /** The task has ended and `next` is the end of its log. */
  done: boolean
  /** Decisions not in the log (the cap, a disk that refused them), as the record counts them. */
  omitted: number
  lost: number
}
