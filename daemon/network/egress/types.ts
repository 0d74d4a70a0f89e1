import type { NetworkDecision as Decision, NetworkMode } from '../../../protocol/index.js'
import type { AllowEntry } from '../allowlist.js'

/** The task a connection or a query comes from, as far as the engine needs it. */
export interface EgressTask {
  id: string
  network: NetworkMode
  /** networkAllow plus the task's own allowNet, parsed. */
  allow: readonly AllowEntry[]
}

/** How a task asked, and one decision of the engine: as network.log keeps it (protocol/network.ts). */
export type { NetworkDecision as Decision, NetworkVia as Via } from '../../../protocol/index.js'

/** Where a connection or a datagram comes from, inside the task's namespace. */
export interface Peer {
  proto: 'tcp' | 'udp'
  address: string
  port: number
}

export interface LocalAddress {
  address: string
  port: number
}

export interface EgressOptions {
  /** networkHosts: name → address, resolved by the engine itself; such a name may lead to an internal address. */
  hosts: Readonly<Record<string, string>>
  /** Which task a connection comes from (kernel facts, the caller's); null: refuse it and record nothing. */
  attribute(peer: Peer, local: LocalAddress): Promise<EgressTask | null>
  /** One call per decision: for a connection once it closes (with its byte counts), at once when blocked. */
  record(task: EgressTask, decision: Decision): void
  /** Default: dns.promises.lookup(name, { all: true, verbatim: true }). */
  resolve?(name: string): Promise<string[]>
  /** How long an upstream connect may take, in milliseconds. Default 10 000. */
  connectTimeoutMs?: number
}
