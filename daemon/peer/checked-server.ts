import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyServerFactory } from 'fastify'
import type { Logger } from 'pino'
import { TendError } from '../../protocol/index.js'
import type { PeerCheck, PeerVerdict } from './peer-check.js'

/** Each connection's verdict, taken once when it was accepted (or at its first request). */
const verdicts = new WeakMap<Socket, PeerVerdict>()

/** What the kernel said of a connection's peer: its pid and uid (for the audit log); undefined before its check. */
export function peerOf(socket: Socket): PeerVerdict | undefined {
  return verdicts.get(socket)
}

/** How long a refused connection may stay open without sending a request, in milliseconds. */
const REFUSED_IDLE_MS = 2000

/**
 * A fastify `serverFactory`: the HTTP server on the daemon's socket, with the peer check in front
 * of fastify. Each connection is checked once, when it is accepted; a request on a refused
 * connection is answered 403 TEND_ERR_SANDBOXED_CALLER and the connection closed, before fastify
 * routes it. `app.inject()` does not pass through here (it has no socket).
 */
export function peerCheckedServerFactory(peerCheck: PeerCheck, log: Logger): FastifyServerFactory<Server> {
  return (handler, options) => {
    const verdictOf = (socket: Socket): PeerVerdict => {
      let verdict = verdicts.get(socket)
      if (verdict === undefined) {
        verdict = checkSocket(peerCheck, socket)
        verdicts.set(socket, verdict)
        if (!verdict.allowed) {
          log.warn({ peerPid: verdict.pid, peerUid: verdict.uid, detail: verdict.detail }, 'connection refused: the caller runs inside a sandbox')
          socket.setTimeout(REFUSED_IDLE_MS, () => socket.destroy())
        }
      }
      return verdict
    }
    const server = createServer((options.http ?? {}) as object, (request: IncomingMessage, reply: ServerResponse) => {
      const verdict = verdictOf(request.socket)
      if (verdict.allowed) return handler(request, reply)
      refuse(reply, verdict.pid, verdict.detail)
    })
    if (peerCheck.status.enforced) server.on('connection', (socket: Socket) => void verdictOf(socket))
    // What fastify sets on the servers it builds itself.
    server.keepAliveTimeout = options.keepAliveTimeout as number
    server.requestTimeout = options.requestTimeout as number
    server.setTimeout(options.connectionTimeout as number)
    if ((options.maxRequestsPerSocket as number) > 0) server.maxRequestsPerSocket = options.maxRequestsPerSocket as number
    return server
  }
}

function checkSocket(peerCheck: PeerCheck, socket: Socket): PeerVerdict {
  if (!peerCheck.status.enforced) return { allowed: true, pid: 0 }
  const fd = (socket as unknown as { _handle?: { fd?: unknown } })._handle?.fd
  if (typeof fd !== 'number' || fd < 0) return { allowed: false, pid: 0, uid: null, detail: 'its connection has no file descriptor to check' }
  return peerCheck.check(fd)
}

function refuse(reply: ServerResponse, pid: number, detail: string): void {
  const body = JSON.stringify(new TendError('TEND_ERR_SANDBOXED_CALLER', { pid, detail }).toWire())
  reply.shouldKeepAlive = false
  reply.writeHead(403, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), connection: 'close' })
  reply.end(body)
}
