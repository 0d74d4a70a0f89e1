import type { Socket } from 'node:net'

/** Bytes a relay carried: task → upstream, upstream → task. */
export interface RelayBytes {
  sentBytes: number
  receivedBytes: number
}

/**
 * Pipes the task's socket and the upstream's both ways, half-close kept (a client that ends its
 * side still gets the answer), and calls `closed` once both are gone. The counts are the kernel's
 * writes and reads on the upstream socket, so nothing is counted per chunk in JavaScript.
 */
export function relay(client: Socket, upstream: Socket, closed: (bytes: RelayBytes) => void): void {
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
