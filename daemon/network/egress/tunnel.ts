import type { Socket } from 'node:net'
import { classifyFirstBytes } from './first-bytes.js'
import { hostOf } from './destination.js'
import { relay, type RelayBytes } from './relay.js'
import type { Upstream } from './upstream.js'

/** What a tunnel turned out to carry, once the first bytes were read. */
export type TunnelOutcome = { kind: 'relayed'; bytes: RelayBytes } | { kind: 'refused'; reason: string } | { kind: 'http'; head: Buffer } | { kind: 'gone' }

/**
 * Carries a connection the engine allowed to `name` (CONNECT, SOCKS5 or a synthetic address) to its
 * upstream, after the first bytes the task sends are read: a TLS ClientHello must name `name`
 * (none is fine), a plain HTTP request goes back to the HTTP handling (`http`, with the bytes read
 * so far; the upstream connection is then the caller's), anything else is piped as it is. When the
 * upstream speaks first (ssh banners, SMTP, databases), nothing HTTP or TLS can follow to be
 * checked on this connection, and it is piped at once.
 */
export function carryTunnel(client: Socket, upstream: Upstream, name: string, head: Buffer, done: (outcome: TunnelOutcome) => void): void {
  let buffered = head
  let settled = false
  const settle = () => {
    settled = true
    client.removeListener('data', onClientData)
    client.removeListener('end', onGone)
    client.removeListener('close', onGone)
    upstream.socket.removeListener('data', onUpstreamData)
    upstream.socket.removeListener('end', onGone)
    upstream.socket.removeListener('close', onGone)
    client.pause()
    upstream.socket.pause()
  }
  const stop = (outcome: TunnelOutcome) => {
    settle()
    client.destroy()
    upstream.socket.destroy()
    done(outcome)
  }
  const carry = (early?: Buffer) => {
    settle()
    if (early !== undefined) upstream.socket.unshift(early)
    if (buffered.length > 0) upstream.socket.write(buffered)
    relay(client, upstream.socket, (bytes) => done({ kind: 'relayed', bytes }))
  }
  const look = () => {
    const first = classifyFirstBytes(buffered)
    if (first.kind === 'more') return
    if (first.kind === 'bad-tls' || first.kind === 'bad-http') return stop({ kind: 'refused', reason: first.problem })
    if (first.kind === 'tls' && first.serverName !== null && hostOf(first.serverName) !== hostOf(name)) {
      return stop({ kind: 'refused', reason: `TLS names ${first.serverName}, not ${name}` })
    }
    if (first.kind === 'http') {
      settle()
      return done({ kind: 'http', head: buffered })
    }
    carry()
  }
  const onClientData = (chunk: Buffer) => {
    buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk])
    look()
  }
  const onUpstreamData = (chunk: Buffer) => {
    carry(chunk)
  }
  // A side that ends before the first bytes could be judged ends the tunnel: nothing was carried.
  const onGone = () => {
    if (!settled) stop({ kind: 'gone' })
  }
  client.on('error', onGone)
  upstream.socket.on('error', onGone)
  client.once('end', onGone)
  client.once('close', onGone)
  upstream.socket.once('end', onGone)
  upstream.socket.once('close', onGone)
  look()
  if (settled) return
  client.on('data', onClientData)
  upstream.socket.on('data', onUpstreamData)
  client.resume()
  upstream.socket.resume()
}
