import { nativeArtifact } from '../../native/artifacts.js'
import { loadAddon } from '../../native/load-addon.js'

/** The control channel of a network holder (holder-control.c). */
export interface HolderControl {
  /** A SOCK_SEQPACKET pair: [the daemon's end, the holder's end], both close-on-exec. */
  pair(): [number, number]
  /** Sends `text` (none when empty), waits up to timeoutMs for one reply, and the descriptor it carried (-1: none). Throws with `errno`. */
  exchange(fd: number, text: string, timeoutMs: number): { reply: string; fd: number }
}

/** The holder program (tend-netns.c): its source build, else the package's prebuilt one (daemon/native/artifacts.ts). */
export const HOLDER_PATH = nativeArtifact('tend-netns')

let loaded: ReturnType<typeof loadAddon<HolderControl>> | undefined

/** The addon, or why it cannot be had (loaded once). */
export function holderControl(): ReturnType<typeof loadAddon<HolderControl>> {
  loaded ??= loadAddon<HolderControl>('holderControl', 'network holder', ['pair', 'exchange'])
  return loaded
}
