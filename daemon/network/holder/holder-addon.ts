import { fileURLToPath } from 'node:url'
import { loadAddon } from '../../native-addon.js'

/** The control channel of a network holder (holder-control.c). */
export interface HolderControl {
  /** A SOCK_SEQPACKET pair: [the daemon's end, the holder's end], both close-on-exec. */
  pair(): [number, number]
  /** Sends `text` (none when empty), waits up to timeoutMs for one reply, and the descriptor it carried (-1: none). Throws with `errno`. */
  exchange(fd: number, text: string, timeoutMs: number): { reply: string; fd: number }
}

/** dist/daemon/network/holder/holder-control.node and tend-netns, built by daemon/network/holder/build.mjs. */
export const HOLDER_ADDON_PATH = fileURLToPath(new URL('./holder-control.node', import.meta.url))
export const HOLDER_PATH = fileURLToPath(new URL('./tend-netns', import.meta.url))

let loaded: ReturnType<typeof loadAddon<HolderControl>> | undefined

/** The addon, or why it cannot be had (loaded once). */
export function holderControl(): ReturnType<typeof loadAddon<HolderControl>> {
  loaded ??= loadAddon<HolderControl>(HOLDER_ADDON_PATH, 'network holder', ['pair', 'exchange'])
  return loaded
}
