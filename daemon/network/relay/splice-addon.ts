import { fileURLToPath } from 'node:url'
import { loadAddon } from '../../native-addon.js'

/** The relay addon (splice-relay.c): relays two sockets' descriptors in a thread, inside the kernel. */
export interface SpliceRelay {
  relay(clientFd: number, upstreamFd: number, done: (sentBytes: number, receivedBytes: number, error: string) => void): void
}

/** dist/daemon/network/relay/splice-relay.node, built by daemon/network/relay/build.mjs. */
const ADDON_PATH = fileURLToPath(new URL('./splice-relay.node', import.meta.url))

let loaded: ReturnType<typeof loadAddon<SpliceRelay>> | undefined

/** The addon, or null where it was not built (the proxy then relays through Node streams). */
export function spliceRelay(): SpliceRelay | null {
  loaded ??= loadAddon<SpliceRelay>(ADDON_PATH, 'egress relay', ['relay'])
  return loaded.addon
}
