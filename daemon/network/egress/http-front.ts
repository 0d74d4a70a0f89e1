import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { destinationLabel } from '../../../protocol/index.js'
import { hostMismatch, parseAuthority, type Authority } from './authority.js'
import type { Engine, Request } from './engine.js'
import { answerBlocked, forwardRequest } from './http-forward.js'
import { carryTunnel } from './tunnel.js'
import type { EgressTask, Via } from './types.js'
import type { Upstream } from './upstream.js'

/** Whose connection the HTTP parser is reading, and for what. */
export interface HttpContext {
  task: EgressTask
  via: Via
  /** A connection already bound to one destination (a synthetic address, a CONNECT, SOCKS5): every request's Host must name it. */
  fixed?: Authority
  /** An upstream connection already open to `fixed`, used by the first request. */
  spare?: Upstream
}

/**
 * Node's HTTP parser, fed the sockets the engine accepts (never listening itself): absolute-URI
 * requests and CONNECT on the proxy port, and plain HTTP found on a bound connection.
 */
export class HttpFront {
  private readonly server: Server
  private readonly contexts = new WeakMap<Socket, HttpContext>()

  constructor(private readonly engine: Engine) {
    // No request timeout: an upload through the proxy takes as long as it takes (the task's own timeouts apply).
    this.server = createServer({ requireHostHeader: false, requestTimeout: 0 })
    // Answer requests whose client already ended its side, rather than aborting them (node:http's
    // own switch, not in @types/node; the half-close test fails if it goes).
    ;(this.server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true
    this.server.on('request', (req: IncomingMessage, res: ServerResponse) => void this.onRequest(req, res).catch(() => res.destroy()))
    this.server.on('connect', (req: IncomingMessage, socket: Socket, head: Buffer) => void this.onConnect(req, socket, head).catch(() => socket.destroy()))
  }

  /** Reads HTTP from `socket`, whose first bytes (already read) are `head`. */
  accept(socket: Socket, head: Buffer, context: HttpContext): void {
    this.contexts.set(socket, context)
    // A client may end its side once it has sent its request (HTTP/1.0 tools do): the answer must still reach it.
    socket.allowHalfOpen = true
    if (context.spare !== undefined) socket.once('close', () => context.spare?.socket.destroy())
    this.server.emit('connection', socket)
    if (head.length > 0) socket.emit('data', head)
    socket.resume()
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const context = this.contexts.get(req.socket as Socket)
    if (context === undefined) return void res.destroy()
    const spare = context.spare
    context.spare = undefined
    const hostCount = req.rawHeaders.filter((value, index) => index % 2 === 0 && value.toLowerCase() === 'host').length
    const target = hostCount > 1 ? { problem: 'a request with more than one Host header' } : this.targetOf(req, context)
    if ('problem' in target) {
      spare?.socket.destroy()
      res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' })
      return void res.end(`tend: ${target.problem}\n`)
    }
    // On a connection bound to a destination, the request names its host by an absolute URI or by Host.
    const named = context.fixed !== undefined && !target.absolute ? (parseAuthority(req.headers.host ?? '', target.port) ?? target) : target
    const mismatch =
      context.fixed !== undefined
        ? (hostMismatch(destinationLabel(named), context.fixed) ?? hostMismatch(req.headers.host, target))
        : hostMismatch(req.headers.host, target)
    const request: Request = { task: context.task, name: named.name, port: named.port, via: context.via }
    if (mismatch !== null) {
      spare?.socket.destroy()
      this.engine.blocked(request, mismatch)
      return answerBlocked(res, named, mismatch)
    }
    await forwardRequest(this.engine, request, target.path, req, res, spare)
  }

  /** Where a request goes: its absolute URI's host, or the bound destination for origin-form. */
  private targetOf(req: IncomingMessage, context: HttpContext): (Authority & { path: string; absolute: boolean }) | { problem: string } {
    const url = req.url ?? ''
    if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) {
      if (context.fixed !== undefined && (url.startsWith('/') || url === '*')) return { ...context.fixed, path: url, absolute: false }
      return { problem: 'the proxy takes absolute http:// URIs and CONNECT (set HTTP_PROXY, not a request to the proxy itself)' }
    }
    let parsed: URL
    try {
      parsed = new URL(url)
    } catch {
      return { problem: `${JSON.stringify(url.slice(0, 200))} is not a URL` }
    }
    if (parsed.protocol !== 'http:') return { problem: `${parsed.protocol}// URIs go through CONNECT (HTTPS_PROXY), not a plain request` }
    const authority = parseAuthority(parsed.host, 80)
    if (authority === null) return { problem: `${JSON.stringify(parsed.host)} is not a host` }
    return { ...authority, path: `${parsed.pathname}${parsed.search}`, absolute: true }
  }

  private async onConnect(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    const context = this.contexts.get(socket)
    if (context === undefined) return void socket.destroy()
    socket.on('error', () => socket.destroy())
    const target = parseAuthority(req.url ?? '', null)
    if (context.fixed !== undefined || target === null) {
      context.spare?.socket.destroy()
      const problem =
        context.fixed !== undefined
          ? 'CONNECT goes to the proxy, not through a connection to a host'
          : `CONNECT takes host:port, got ${JSON.stringify((req.url ?? '').slice(0, 200))}`
      return void socket.end(`HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\ntend: ${problem}\n`)
    }
    const request: Request = { task: context.task, name: target.name, port: target.port, via: 'connect' }
    const mismatch = hostMismatch(req.headers.host, target)
    if (mismatch !== null) {
      this.engine.blocked(request, mismatch)
      return void socket.end(blockedResponse(target, mismatch))
    }
    const reached = await this.engine.reach(request)
    if (reached.kind === 'blocked') return void socket.end(blockedResponse(target, reached.reason))
    if (reached.kind === 'unreachable') {
      return void socket.end(
        `HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\ntend: ${destinationLabel(target)}` +
          ` could not be reached (${reached.error})\n`,
      )
    }
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
    this.carry(socket, reached.upstream, request, reached.time, head)
  }

  /** Carries a connection bound to one destination: TLS and anything else piped, plain HTTP parsed again. */
  carry(socket: Socket, upstream: Upstream, request: Request, time: string, head: Buffer): void {
    carryTunnel(socket, upstream, request.name, head, (outcome) => {
      if (outcome.kind === 'relayed') this.engine.allowed(request, time, upstream.address, outcome.bytes)
      else if (outcome.kind === 'refused') this.engine.blocked(request, outcome.reason, time)
      else if (outcome.kind === 'http')
        this.accept(socket, outcome.head, { task: request.task, via: request.via, fixed: { name: request.name, port: request.port }, spare: upstream })
      else this.engine.allowed(request, time, upstream.address, { sentBytes: 0, receivedBytes: 0 })
    })
  }
}

function blockedResponse(target: Authority, reason: string): string {
  const safeReason = reason.replace(/[^\x20-\x7e]/g, '?')
  const body = `tend: blocked ${destinationLabel(target)} (${safeReason})\n`
  return (
    `HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nX-Tend-Blocked: ${safeReason}` +
    `\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  )
}
