import { connect, type Socket } from 'node:net'

/** A connection to the upstream, on the address it reached. */
export interface Upstream {
  socket: Socket
  address: string
}

/** Why an upstream connect failed, as a code (ECONNREFUSED, ETIMEDOUT, …). */
export class UpstreamError extends Error {
  constructor(readonly code: string) {
    super(`upstream unreachable: ${code}`)
  }
}

/**
 * Connects to the first of `addresses` that answers on `port`: only addresses the engine checked,
 * so a task's own lookups never choose where bytes go. Rejects with the last address's error code.
 */
export async function connectUpstream(addresses: readonly string[], port: number, timeoutMs: number): Promise<Upstream> {
  let code = 'ENOTFOUND'
  for (const address of addresses) {
    try {
      return { socket: await connectOne(address, port, timeoutMs), address }
    } catch (error) {
      code = error instanceof UpstreamError ? error.code : String(error)
    }
  }
  throw new UpstreamError(code)
}

function connectOne(address: string, port: number, timeoutMs: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: address, port, noDelay: true })
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new UpstreamError('ETIMEDOUT'))
    }, timeoutMs)
    socket.once('connect', () => {
      clearTimeout(timer)
      socket.removeListener('error', onError)
      resolve(socket)
    })
    const onError = (error: NodeJS.ErrnoException) => {
      clearTimeout(timer)
      reject(new UpstreamError(error.code ?? error.message))
    }
    socket.once('error', onError)
  })
}
