import type { Socket } from 'node:net'
import type { Authority } from './authority.js'
import { hostOf } from './destination.js'

/** SOCKS5 reply codes (RFC 1928 6). */
export const SOCKS_REPLY = {
  succeeded: 0x00,
  generalFailure: 0x01,
  notAllowed: 0x02,
  hostUnreachable: 0x04,
  connectionRefused: 0x05,
  ttlExpired: 0x06,
  commandNotSupported: 0x07,
  addressTypeNotSupported: 0x08,
} as const

/** The reply to a request, bound address 0.0.0.0:0 (the task reaches nothing by it). */
export function socksReply(code: number): Buffer {
  return Buffer.from([0x05, code, 0x00, 0x01, 0, 0, 0, 0, 0, 0])
}

/** A SOCKS5 CONNECT the task asked for, with the bytes it sent after it; or the reply already sent and why. */
export type SocksRequest = { target: Authority; head: Buffer } | { refused: string }

/**
 * Reads a SOCKS5 greeting (no authentication is the only method offered) and one request. Anything
 * but CONNECT is answered with its reply code here; the caller answers a CONNECT.
 */
export function readSocksRequest(socket: Socket): Promise<SocksRequest> {
  return new Promise((resolve) => {
    let buffered = Buffer.alloc(0)
    let greeted = false
    const finish = (result: SocksRequest) => {
      socket.removeListener('data', onData)
      socket.removeListener('close', onClose)
      socket.pause()
      resolve(result)
    }
    const refuse = (reply: Buffer | null, why: string) => {
      if (reply === null) socket.destroy()
      else socket.end(reply)
      finish({ refused: why })
    }
    const onClose = () => finish({ refused: 'closed' })
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk])
      if (!greeted) {
        if (buffered.length < 2) return
        if (buffered[0] !== 0x05) return refuse(null, 'not SOCKS5')
        const methods = buffered[1]!
        if (buffered.length < 2 + methods) return
        if (!buffered.subarray(2, 2 + methods).includes(0x00)) return refuse(Buffer.from([0x05, 0xff]), 'no acceptable method')
        socket.write(Buffer.from([0x05, 0x00]))
        greeted = true
        buffered = buffered.subarray(2 + methods)
      }
      if (buffered.length < 5) return
      if (buffered[0] !== 0x05 || buffered[2] !== 0x00) return refuse(socksReply(SOCKS_REPLY.generalFailure), 'malformed request')
      const type = buffered[3]!
      const addressLength = type === 0x01 ? 4 : type === 0x04 ? 16 : type === 0x03 ? 1 + buffered[4]! : -1
      if (addressLength === -1) return refuse(socksReply(SOCKS_REPLY.addressTypeNotSupported), 'address type not supported')
      const end = 4 + addressLength + 2
      if (buffered.length < end) return
      if (buffered[1] !== 0x01) return refuse(socksReply(SOCKS_REPLY.commandNotSupported), 'command not supported')
      const address = buffered.subarray(4, 4 + addressLength)
      const name = type === 0x01 ? [...address].join('.') : type === 0x04 ? ipv6Text(address) : address.subarray(1).toString('latin1')
      const port = buffered.readUInt16BE(4 + addressLength)
      finish({ target: { name: hostOf(name), port }, head: buffered.subarray(end) })
    }
    socket.on('data', onData)
    socket.once('close', onClose)
    socket.resume()
  })
}

/** An IPv6 address in its shortest form (as URLs write it). */
function ipv6Text(bytes: Buffer): string {
  const groups: string[] = []
  for (let i = 0; i < 16; i += 2) groups.push(bytes.readUInt16BE(i).toString(16))
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1)
}
