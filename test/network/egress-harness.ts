import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { Duplex } from 'node:stream'
import { connect as tlsConnect } from 'node:tls'
import { join } from 'node:path'
import { parseAllowList, type AllowEntry } from '../../daemon/network/allowlist.js'
import { EGRESS_HIGH_WATER_MARK_BYTES, EgressProxy, type Decision, type EgressTask } from '../../daemon/network/egress/index.js'

/** What an upstream saw of each connection: bytes each way, counted by the kernel's socket. */
export interface SeenConnection {
  socket: Socket
  read(): number
  written(): number
}

/** A server on the host's 127.0.0.1 that tracks its connections (so a test can compare byte counts and close them all). */
export function tracked<T extends Server | HttpServer>(server: T): T & { seen: SeenConnection[] } {
  const seen: SeenConnection[] = []
  server.on('connection', (socket: Socket) => seen.push({ socket, read: () => socket.bytesRead, written: () => socket.bytesWritten }))
  return Object.assign(server, { seen })
}

export async function listening<T extends Server | HttpServer>(server: T, host = '127.0.0.1'): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, host, () => resolve())
  })
  return (server.address() as AddressInfo).port
}

export async function closeServer(server: (Server | HttpServer) & { seen?: SeenConnection[] }): Promise<void> {
  for (const connection of server.seen ?? []) connection.socket.destroy()
  if ('closeAllConnections' in server) server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
}

/** A self-signed certificate for the given names, made now with openssl (the test fails loudly without it). */
export function makeCertificate(names: readonly string[]): { key: string; cert: string } {
  const dir = mkdtempSync(join(tmpdir(), 'tend-egress-cert-'))
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        `/CN=${names[0]}`,
        '-addext',
        `subjectAltName=${names.map((name) => `DNS:${name}`).join(',')}`,
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'pipe' },
    )
    return { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8') }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** An HTTP upstream that says what it was asked: method, path and Host. */
export function echoHttp() {
  return tracked(
    createHttpServer((req, res) => {
      req.resume()
      const hosts = req.rawHeaders.filter((_value, index) => index % 2 === 0 && req.rawHeaders[index]!.toLowerCase() === 'host').length
      req.on('end', () => res.end(`upstream saw ${req.method} ${req.url} host=${req.headers.host}${hosts === 1 ? '' : ` (${hosts} Host headers)`}`))
    }),
  )
}

export function echoHttps(tlsFiles: { key: string; cert: string }) {
  return tracked(
    createHttpsServer(tlsFiles, (req, res) => {
      req.resume()
      req.on('end', () => res.end(`tls upstream saw ${req.method} ${req.url} host=${req.headers.host}`))
    }),
  )
}

export function parsedAllow(patterns: readonly string[]): AllowEntry[] {
  const { entries, problems } = parseAllowList(patterns, 'test')
  if (problems.length > 0) throw new Error(problems.join('; '))
  return entries
}

/**
 * An EgressProxy fed by two listeners on 127.0.0.1: the proxy port, and a "synthetic" port whose
 * connections stand for `transparentName:transparentPort`. Every decision lands in `decisions`.
 */
export async function startProxy(options: {
  task: EgressTask | null
  hosts?: Record<string, string>
  resolve?: (name: string) => Promise<string[]>
  connectTimeoutMs?: number
}) {
  const decisions: Array<{ task: EgressTask; decision: Decision }> = []
  const resolved: string[] = []
  const state = { task: options.task, transparentName: '', transparentPort: 0 }
  const proxy = new EgressProxy({
    hosts: options.hosts ?? {},
    attribute: async () => state.task,
    record: (task, decision) => decisions.push({ task, decision }),
    resolve: async (name) => {
      resolved.push(name)
      if (options.resolve === undefined) throw Object.assign(new Error('no resolver in this test'), { code: 'ENOTFOUND' })
      return options.resolve(name)
    },
    connectTimeoutMs: options.connectTimeoutMs ?? 5_000,
  })
  const proxyListener = createServer({ highWaterMark: EGRESS_HIGH_WATER_MARK_BYTES }, (socket) => proxy.acceptProxy(socket))
  const transparentListener = createServer({ highWaterMark: EGRESS_HIGH_WATER_MARK_BYTES }, (socket) =>
    proxy.acceptTransparent(socket, state.transparentName, state.transparentPort),
  )
  const proxyPort = await listening(proxyListener)
  const transparentPort = await listening(transparentListener)
  return {
    proxy,
    decisions,
    resolved,
    state,
    proxyPort,
    transparentPort,
    async stop() {
      proxy.close()
      await Promise.all([proxyListener, transparentListener].map((server) => new Promise<void>((resolve) => server.close(() => resolve()))))
    },
  }
}

/** Runs curl to its exit: status, stdout, stderr. */
export function curl(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('curl', ['--silent', '--show-error', '--max-time', '20', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.once('error', reject)
    child.once('close', (code) => resolve({ code: code ?? -1, stdout, stderr }))
  })
}

/** A raw TCP connection to 127.0.0.1:port, collecting everything it receives until the peer ends it. */
export function rawConnection(port: number) {
  const socket = connect({ host: '127.0.0.1', port })
  const chunks: Buffer[] = []
  let ended = false
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  const received = () => {
    if (chunks.length > 1) chunks.splice(0, chunks.length, Buffer.concat(chunks))
    return chunks[0] ?? Buffer.alloc(0)
  }
  socket.on('error', () => undefined)
  socket.on('close', () => (ended = true))
  return {
    socket,
    received,
    text: () => received().toString('latin1'),
    ended: () => ended,
  }
}

/** The first TLS record a Node client sends naming `servername`, caught before it leaves. */
export function clientHello(servername: string): Promise<Buffer> {
  return new Promise((resolve) => {
    const catcher = new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, callback) {
        resolve(Buffer.from(chunk))
        callback()
      },
    })
    const tls = tlsConnect({ socket: catcher as unknown as Socket, servername })
    tls.on('error', () => undefined)
    setImmediate(() => tls.destroy())
  })
}
