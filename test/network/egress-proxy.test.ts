import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { request as httpRequest } from 'node:http'
import { createServer, type Socket } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import { parseAllowList } from '../../daemon/network/allowlist.js'
import type { EgressTask } from '../../daemon/network/egress/index.js'
import { waitFor } from '../helpers/wait-for.js'
import { closeServer, curl, echoHttp, echoHttps, listening, makeCertificate, parsedAllow, rawConnection, startProxy, tracked } from './egress-harness.js'

/*
 * The egress proxy engine on real sockets: curl and Node clients talk to an EgressProxy fed by
 * listeners on the host's 127.0.0.1, and upstreams run on 127.0.0.1 too; networkHosts maps the
 * test's names there (a name it maps may lead to an internal address).
 */

const tlsFiles = makeCertificate(['allowed.example', 'other.example'])
const http = echoHttp()
const https = echoHttps(tlsFiles)
// A server that speaks first, as ssh does: the proxy must pipe it without waiting for the task.
const banner = tracked(createServer((socket) => {
  socket.on('error', () => undefined)
  socket.write('SSH-2.0-upstream\r\n')
  socket.on('data', (chunk: Buffer) => socket.write(`echo:${chunk.toString()}`))
}))
let httpPort = 0
let httpsPort = 0
let bannerPort = 0
let closedPort = 0
let engine: Awaited<ReturnType<typeof startProxy>>

const HOSTS = { 'allowed.example': '127.0.0.1', 'other.example': '127.0.0.1', 'mapped.example': '127.0.0.1', 'closed.example': '127.0.0.1' }

function task(patterns: readonly string[], network: EgressTask['network'] = 'allow'): EgressTask {
  return { id: 'task-1', network, allow: parsedAllow(patterns) }
}

function allowedTask(): EgressTask {
  return task([`allowed.example:${httpPort}`, `allowed.example:${httpsPort}`, `allowed.example:${bannerPort}`, `mapped.example:${httpPort}`, `loopy.example:${httpPort}`, `closed.example:${closedPort}`])
}

beforeAll(async () => {
  httpPort = await listening(http)
  httpsPort = await listening(https)
  bannerPort = await listening(banner)
  const closed = createServer()
  closedPort = await listening(closed)
  await closeServer(closed)
})

afterAll(async () => {
  await Promise.all([http, https, banner].map((server) => closeServer(server)))
})

afterEach(async () => {
  await engine?.stop()
})

async function start(options: { task?: EgressTask | null; hosts?: Record<string, string>; resolve?: (name: string) => Promise<string[]> } = {}) {
  engine = await startProxy({ task: options.task === undefined ? allowedTask() : options.task, hosts: options.hosts ?? HOSTS, resolve: options.resolve })
  return engine
}

const proxyUrl = () => `http://127.0.0.1:${engine.proxyPort}`

/** The decisions recorded, once `count` are there (an allowed connection is recorded when it closes). */
async function decisions(count: number) {
  await waitFor(`${count} decision(s) recorded`, () => engine.decisions.length >= count)
  return engine.decisions.map((entry) => entry.decision)
}

/** The upstream's own count of a connection's bytes, to compare with the record's. */
async function upstreamBytes(server: { seen: Array<{ socket: Socket; read(): number; written(): number }> }) {
  const connection = server.seen.at(-1)!
  await waitFor('the upstream connection closed', () => connection.socket.closed)
  return { sentBytes: connection.read(), receivedBytes: connection.written() }
}

describe('allowed names', () => {
  test('an absolute-URI request through the HTTP proxy reaches the upstream, and is recorded with its bytes', async () => {
    await start()
    const result = await curl(['--proxy', proxyUrl(), `http://allowed.example:${httpPort}/path?q=1`])
    expect(result.stdout).toBe(`upstream saw GET /path?q=1 host=allowed.example:${httpPort}`)
    const [decision] = await decisions(1)
    expect(decision).toMatchObject({ name: 'allowed.example', port: httpPort, via: 'http', decision: 'allowed', address: '127.0.0.1' })
    expect(decision!.error).toBeUndefined()
    expect({ sentBytes: decision!.sentBytes, receivedBytes: decision!.receivedBytes }).toEqual(await upstreamBytes(http))
    expect(decision!.receivedBytes).toBeGreaterThan(0)
    expect(engine.resolved).toEqual([])
  })

  test('HTTPS through CONNECT reaches the upstream with real TLS, recorded once the tunnel closes', async () => {
    await start()
    const result = await curl(['--proxy', proxyUrl(), '--cacert', await certFile(), `https://allowed.example:${httpsPort}/secure`])
    expect(result.stderr).toBe('')
    expect(result.stdout).toBe(`tls upstream saw GET /secure host=allowed.example:${httpsPort}`)
    const [decision] = await decisions(1)
    expect(decision).toMatchObject({ name: 'allowed.example', port: httpsPort, via: 'connect', decision: 'allowed', address: '127.0.0.1' })
    expect({ sentBytes: decision!.sentBytes, receivedBytes: decision!.receivedBytes }).toEqual(await upstreamBytes(https))
  })

  test('SOCKS5 with a domain name reaches the upstream over TLS', async () => {
    await start()
    const result = await curl(['--socks5-hostname', `127.0.0.1:${engine.proxyPort}`, '--cacert', await certFile(), `https://allowed.example:${httpsPort}/socks`])
    expect(result.stderr).toBe("")
    expect(result.stdout).toBe(`tls upstream saw GET /socks host=allowed.example:${httpsPort}`)
    const [decision] = await decisions(1)
    expect(decision).toMatchObject({ name: 'allowed.example', port: httpsPort, via: 'socks', decision: 'allowed', address: '127.0.0.1' })
    expect({ sentBytes: decision!.sentBytes, receivedBytes: decision!.receivedBytes }).toEqual(await upstreamBytes(https))
  })

  test('a transparent TLS connection (a synthetic address) reaches the name it stands for', async () => {
    await start()
    Object.assign(engine.state, { transparentName: 'allowed.example', transparentPort: httpsPort })
    const result = await curl(['--connect-to', `allowed.example:${httpsPort}:127.0.0.1:${engine.transparentPort}`, '--cacert', await certFile(), `https://allowed.example:${httpsPort}/t`])
    expect(result.stdout).toBe(`tls upstream saw GET /t host=allowed.example:${httpsPort}`)
    const [decision] = await decisions(1)
    expect(decision).toMatchObject({ name: 'allowed.example', port: httpsPort, via: 'transparent', decision: 'allowed' })
    expect({ sentBytes: decision!.sentBytes, receivedBytes: decision!.receivedBytes }).toEqual(await upstreamBytes(https))
  })

  test('a transparent connection to a server that speaks first (ssh) is piped as it is', async () => {
    await start()
    Object.assign(engine.state, { transparentName: 'allowed.example', transparentPort: bannerPort })
    const client = rawConnection(engine.transparentPort)
    await waitFor('the upstream banner through the proxy', () => client.text() === 'SSH-2.0-upstream\r\n')
    client.socket.write('SSH-2.0-client\r\n')
    await waitFor('the echo of the client banner', () => client.text().includes('echo:SSH-2.0-client'))
    client.socket.end()
    const [decision] = await decisions(1)
    expect(decision).toMatchObject({ name: 'allowed.example', port: bannerPort, via: 'transparent', decision: 'allowed', sentBytes: 16 })
    expect({ sentBytes: decision!.sentBytes, receivedBytes: decision!.receivedBytes }).toEqual(await upstreamBytes(banner))
  })

  test('a name networkHosts maps to loopback is allowed; the same address found by resolving is refused', async () => {
    await start({ resolve: async () => ['127.0.0.1'] })
    const mapped = await curl(['--proxy', proxyUrl(), `http://mapped.example:${httpPort}/`])
    expect(mapped.stdout).toBe(`upstream saw GET / host=mapped.example:${httpPort}`)
    const resolved = await curl(['--proxy', proxyUrl(), '--include', `http://loopy.example:${httpPort}/`])
    expect(resolved.stdout).toMatch(/^HTTP\/1\.1 403 /)
    expect(resolved.stdout).toContain('X-Tend-Blocked: resolves to 127.0.0.1, an internal address')
    expect(resolved.stdout).toContain(`tend: blocked loopy.example:${httpPort} (resolves to 127.0.0.1, an internal address)\n`)
    const recorded = await decisions(2)
    expect(recorded.map((d) => [d.name, d.decision, d.reason])).toEqual([
      ['mapped.example', 'allowed', undefined],
      ['loopy.example', 'blocked', 'resolves to 127.0.0.1, an internal address'],
    ])
    expect(engine.resolved).toEqual(['loopy.example'])
  })
})

let certPath: string | undefined
async function certFile(): Promise<string> {
  if (certPath !== undefined) return certPath
  const { mkdtempSync, writeFileSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const { join } = await import('node:path')
  const dir = mkdtempSync(join(tmpdir(), 'tend-egress-ca-'))
  certPath = join(dir, 'cert.pem')
  writeFileSync(certPath, tlsFiles.cert)
  return certPath
}
afterAll(async () => {
  if (certPath === undefined) return
  const { rmSync } = await import('node:fs')
  const { dirname } = await import('node:path')
  rmSync(dirname(certPath), { recursive: true, force: true })
})
