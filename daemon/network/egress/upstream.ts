import { connect, type Socket, type TcpNetConnectOpts } from 'node:net'

/**
 * How much a relayed socket buffers before its writer waits, in bytes: 1 MiB, not Node's 16 KiB,
 * so that a download is carried in few large writes. Listeners whose sockets the engine takes
 * should be made with `net.createServer({ highWaterMark: EGRESS_HIGH_WATER_MARK_BYTES })`.
 */
export const EGRESS_HIGH_WATER_MARK_BYTES = 1024 * 1024

/**
 * Every upstream read lands here first and is copied out at once (reads run one at a time on this
 * thread, so one buffer serves every connection): reads of up to 1 MiB instead of libuv's 64 KiB,
 * a quarter of the system calls on a download for one memcpy each.
 */
const READ_BUFFER = Buffer.allocUnsafe(EGRESS_HIGH_WATER_MARK_BYTES)

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
    // highWaterMark reaches the stream's constructor (both sides), though @types/node does not list it here.
    const options: TcpNetConnectOpts & { highWaterMark: number } = {
      host: address,
      port,
      noDelay: true,
      highWaterMark: EGRESS_HIGH_WATER_MARK_BYTES,
      onread: { buffer: READ_BUFFER, callback: (size: number, buffer: Uint8Array) => socket.push(Buffer.from(buffer.subarray(0, size))) },
    }
    const socket: Socket = connect(options)
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
