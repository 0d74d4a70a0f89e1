import type { Socket } from 'node:net'
import { spliceRelay } from '../relay/splice-addon.js'

/** Bytes a relay carried: task → upstream, upstream → task. */
export interface RelayBytes {
  sentBytes: number
  receivedBytes: number
}

/**
 * Relays the task's socket and the upstream's both ways, half-close kept (a client that ends its
 * side still gets the answer), and calls `closed` once both are gone, with the bytes each way
 * (what crossed before the relay included). Where the relay addon is built and nothing is left
 * in either socket's buffers, the descriptors go to its thread, which moves the bytes with
 * splice(2) inside the kernel; otherwise Node's streams pipe them.
 */
export function relay(client: Socket, upstream: Socket, closed: (bytes: RelayBytes) => void): void {
  if (handOver(client, upstream, closed)) return
  client.allowHalfOpen = true
  upstream.allowHalfOpen = true
  let open = 2
  const onClose = () => {
    if (--open === 0) closed({ sentBytes: upstream.bytesWritten, receivedBytes: upstream.bytesRead })
  }
  const abort = () => {
    client.destroy()
    upstream.destroy()
  }
  client.on('error', abort)
  upstream.on('error', abort)
  client.once('close', onClose)
  upstream.once('close', onClose)
  client.pipe(upstream)
  upstream.pipe(client)
}

/** A socket's libuv handle, whose descriptor the relay thread takes. */
interface StreamHandle {
  fd?: number
  readStop?: () => number
}

/** A relay that moves nothing for this long ends (a peer that never reads nor closes holds descriptors). */
export const RELAY_IDLE_MS = 120_000

/** A relayed connection, by the task's socket it started from: how to end it, and when it has. */
export interface RunningRelay {
  stop(): void
  ended: Promise<void>
}
const running = new WeakMap<Socket, RunningRelay>()

/** The relay thread that carries a task's socket, once Node has let go of it; undefined otherwise. */
export function relayOf(client: Socket): RunningRelay | undefined {
  return running.get(client)
}

/**
 * Relays the thread addon runs at once, across the daemon: each holds two sockets and two pipes
 * (six descriptors) and a thread. Past it, connections are piped by Node (two descriptors each).
 */
export const SPLICE_RELAYS_MOST = 512
let spliceRelays = 0

function handOver(client: Socket, upstream: Socket, closed: (bytes: RelayBytes) => void): boolean {
  const addon = spliceRelay()
  if (!addon || spliceRelays >= SPLICE_RELAYS_MOST) return false
  const handles = [client, upstream].map((socket) => (socket as unknown as { _handle?: StreamHandle | null })._handle)
  // Bytes Node still holds (read and not consumed, or written and not yet sent) would be lost to the thread.
  const idle = [client, upstream].every((socket) => socket.readableLength === 0 && socket.writableLength === 0 && !socket.destroyed)
  if (!idle || handles.some((handle) => typeof handle?.fd !== 'number' || handle.fd < 0 || typeof handle.readStop !== 'function')) return false
  const before = { sentBytes: upstream.bytesWritten, receivedBytes: upstream.bytesRead }
  for (const handle of handles) handle!.readStop!()
  let finished = false
  let ended!: () => void
  const relay: RunningRelay = { stop: () => {}, ended: new Promise((resolve) => (ended = resolve)) }
  try {
    const handle = addon.relay(handles[0]!.fd!, handles[1]!.fd!, RELAY_IDLE_MS, (sent, received) => {
      finished = true
      spliceRelays--
      closed({ sentBytes: before.sentBytes + sent, receivedBytes: before.receivedBytes + received })
      ended()
    })
    // The handle is closed where done runs: stop() after that would write to another descriptor.
    relay.stop = () => {
      if (!finished) addon.stop(handle)
    }
  } catch {
    return false
  }
  spliceRelays++
  running.set(client, relay)
  // The thread holds its own copies: closing Node's leaves the connections open.
  client.destroy()
  upstream.destroy()
  return true
}
