import { loadAddon } from '../../native/load-addon.js'

/** The relay addon (splice-relay.c): relays two sockets' descriptors in a thread, inside the kernel. */
export interface SpliceRelay {
  /** Starts a relay thread on copies of the two descriptors; the handle is good until `done` was called. */
  relay(clientFd: number, upstreamFd: number, idleMs: number, done: (sentBytes: number, receivedBytes: number, error: string) => void): number
  /** Ends a relay early (its `done` still comes). */
  stop(handle: number): void
}

let loaded: ReturnType<typeof loadAddon<SpliceRelay>> | undefined

/** The addon, or null where it was not built (the proxy then relays through Node streams). */
export function spliceRelay(): SpliceRelay | null {
  loaded ??= loadAddon<SpliceRelay>('spliceRelay', 'egress relay', ['relay', 'stop'])
  return loaded.addon
}
