import { request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http'
import { destinationLabel } from '../../../protocol/index.js'
import type { Engine, Request } from './engine.js'
import type { Upstream } from './upstream.js'

/** Headers about one hop only, never passed on (RFC 9110 7.6.1), plus the proxy's own. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
])

/** Answers a refused request: 403, the reason in a header and in a one-line body. */
export function answerBlocked(res: ServerResponse, target: { name: string; port: number }, reason: string): void {
  const safeReason = reason.replace(/[^\x20-\x7e]/g, '?')
  const body = `tend: blocked ${destinationLabel(target)} (${safeReason})\n`
  res.writeHead(403, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(body), 'X-Tend-Blocked': safeReason })
  res.end(body)
}

export function answerUnreachable(res: ServerResponse, target: { name: string; port: number }, error: string): void {
  const body = `tend: ${destinationLabel(target)} could not be reached (${error})\n`
  res.writeHead(502, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(body) })
  res.end(body)
}

/**
 * The task's headers for the upstream, without hop-by-hop ones (nor those its Connection names),
 * and with the one Host that was checked, whatever the task sent.
 */
function forwardedHeaders(raw: readonly string[], host: string): OutgoingHttpHeaders {
  const named = new Set<string>()
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === 'connection') for (const token of raw[i + 1]!.split(',')) named.add(token.trim().toLowerCase())
  }
  const headers: Record<string, string | string[]> = {}
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!
    const lower = name.toLowerCase()
    if (HOP_BY_HOP.has(lower) || named.has(lower) || lower === 'host') continue
    const existing = headers[name]
    headers[name] = existing === undefined ? raw[i + 1]! : [...(Array.isArray(existing) ? existing : [existing]), raw[i + 1]!]
  }
  headers.Host = host
  // A body sent chunked goes on chunked, framed by Node: passed raw (Node frames no body of a GET),
  // a request hidden in it would reach the upstream as a request of its own.
  if (raw.some((name, index) => index % 2 === 0 && name.toLowerCase() === 'transfer-encoding')) headers['Transfer-Encoding'] = 'chunked'
  return headers
}

function responseHeaders(raw: readonly string[]): string[] {
  const named = new Set<string>()
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === 'connection') for (const token of raw[i + 1]!.split(',')) named.add(token.trim().toLowerCase())
  }
  const kept: string[] = []
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase()
    if (!HOP_BY_HOP.has(lower) && !named.has(lower)) kept.push(raw[i]!, raw[i + 1]!)
  }
  return kept
}

/**
 * Forwards one allowed request to an address the engine checked, over a connection of its own
 * (the task's keep-alive is kept on its side), and records it once the answer is sent, with the
 * bytes that crossed the upstream connection.
 */
export async function forwardRequest(
  engine: Engine,
  request: Request,
  path: string,
  req: IncomingMessage,
  res: ServerResponse,
  spare?: Upstream,
): Promise<void> {
  const reached = await engine.reach(request, spare)
  if (reached.kind === 'blocked') return answerBlocked(res, request, reached.reason)
  if (reached.kind === 'unreachable') return answerUnreachable(res, request, reached.error)
  const { upstream, time } = reached
  if (upstream !== spare) spare?.socket.destroy()
  const outgoing = httpRequest({
    method: req.method,
    path,
    headers: forwardedHeaders(req.rawHeaders, req.headers.host ?? destinationLabel(request)),
    setHost: false,
    createConnection: () => upstream.socket,
  })
  // A spare connection was paused while the first bytes were judged.
  outgoing.once('socket', (socket) => socket.resume())
  let recorded = false
  const record = () => {
    if (recorded) return
    recorded = true
    engine.allowed(request, time, upstream.address, { sentBytes: upstream.socket.bytesWritten, receivedBytes: upstream.socket.bytesRead })
  }
  outgoing.on('response', (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.statusMessage, responseHeaders(answer.rawHeaders))
    answer.pipe(res)
  })
  outgoing.on('error', (error: NodeJS.ErrnoException) => {
    if (!res.headersSent) answerUnreachable(res, request, error.code ?? error.message)
    else res.destroy()
  })
  res.once('close', () => {
    record()
    upstream.socket.destroy()
  })
  req.pipe(outgoing)
}
