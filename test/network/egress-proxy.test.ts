import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { request as httpRequest } from 'node:http'
import { createServer, type Socket } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import { parseAllowList } from '../../daemon/network/allowlist.js'
import type { EgressTask } from '../../daemon/network/egress/index.js'
import { waitFor } from '../helpers/wait-for.js'
import {
  clientHello,
  closeServer,
  curl,
  echoHttp,
  echoHttps,
  listening,
  makeCertificate,
  parsedAllow,
  rawConnection,
  startProxy,
  tracked,
} from './egress-harness.js'

/*
 * The egress proxy engine on real sockets: curl and Node clients talk to an EgressProxy fed by
 * listeners on the host's 127.0.0.1, and upstreams run on 127.0.0.1 too; networkHosts maps the
 * test's names there (a name it maps may lead to an internal address).
 */

const tlsFiles = makeCertificate(['allowed.example', 'other.example'])
const http = echoHttp()
const https = echoHttps(tlsFiles)
// A server that speaks first, as ssh does: the proxy must pipe it without waiting for the task.
const banner = tracked(
  createServer((socket) => {
    socket.on('error', () => undefined)
    socket.write('SSH-2.0-upstream\r\n')
    socket.on('data', (chunk: Buffer) => socket.write(`echo:${chunk.toString()}`))
  }),
)
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
  return task([
    `allowed.example:${httpPort}`,
    `allowed.example:${httpsPort}`,
    `allowed.example:${bannerPort}`,
    `mapped.example:${httpPort}`,
    `loopy.example:${httpPort}`,
    `closed.example:${closedPort}`,
  ])
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

// Each test sees only its own upstream connections.
beforeEach(() => {
  for (const server of [http, https, banner]) {
    for (const connection of server.seen) connection.socket.destroy()
    server.seen.length = 0
  }
})

async function start(
  options: { task?: EgressTask | null; hosts?: Record<string, string>; resolve?: (name: string) => Promise<string[]>; connectTimeoutMs?: number } = {},
) {
  engine = await startProxy({
    task: options.task === undefined ? allowedTask() : options.task,
    hosts: options.hosts ?? HOSTS,
    resolve: options.resolve,
    connectTimeoutMs: options.connectTimeoutMs,
  })
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
    const result = await curl([
      '--socks5-hostname',
      `127.0.0.1:${engine.proxyPort}`,
      '--cacert',
      await certFile(),
      `https://allowed.example:${httpsPort}/socks`,
    ])
    expect(result.stderr).toBe('')
    expect(result.stdout).toBe(`tls upstream saw GET /socks host=allowed.example:${httpsPort}`)
    const [decision] = await decisions(1)
    expect(decision).toMatchObject({ name: 'allowed.example', port: httpsPort, via: 'socks', decision: 'allowed', address: '127.0.0.1' })
    expect({ sentBytes: decision!.sentBytes, receivedBytes: decision!.receivedBytes }).toEqual(await upstreamBytes(https))
  })

  test('a transparent TLS connection (a synthetic address) reaches the name it stands for', async () => {
    await start()
    Object.assign(engine.state, { transparentName: 'allowed.example', transparentPort: httpsPort })
    const result = await curl([
      '--connect-to',
      `allowed.example:${httpsPort}:127.0.0.1:${engine.transparentPort}`,
      '--cacert',
      await certFile(),
      `https://allowed.example:${httpsPort}/t`,
    ])
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

/** A SOCKS5 CONNECT by hand: greeting, then a request for `name` (a domain) or an address type byte with its bytes. */
async function socksConnect(request: Buffer): Promise<Buffer> {
  const client = rawConnection(engine.proxyPort)
  client.socket.write(Buffer.from([0x05, 0x01, 0x00]))
  await waitFor('the method selection', () => client.received().length >= 2)
  expect([...client.received().subarray(0, 2)]).toEqual([0x05, 0x00])
  client.socket.write(request)
  await waitFor('the SOCKS5 reply and the end of the connection', () => client.received().length >= 12 && client.ended())
  return client.received().subarray(2)
}

function socksDomain(command: number, name: string, port: number): Buffer {
  const portBytes = Buffer.alloc(2)
  portBytes.writeUInt16BE(port)
  return Buffer.concat([Buffer.from([0x05, command, 0x00, 0x03, name.length]), Buffer.from(name), portBytes])
}

/** CONNECT by hand, then a TLS handshake naming `servername` inside the tunnel. */
async function tlsThroughConnect(target: string, servername: string): Promise<{ statusLine: string; handshake: 'secure' | 'ended' }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: engine.proxyPort, method: 'CONNECT', path: target, headers: { host: target } })
    req.on('error', reject)
    req.on('connect', (res, socket) => {
      const statusLine = `${res.statusCode}`
      const tls = tlsConnect({ socket, servername, ca: tlsFiles.cert })
      tls.once('secureConnect', () => {
        tls.destroy()
        resolve({ statusLine, handshake: 'secure' })
      })
      tls.once('error', () => resolve({ statusLine, handshake: 'ended' }))
      tls.once('close', () => resolve({ statusLine, handshake: 'ended' }))
    })
    req.end()
  })
}

describe('refusals, each recorded', () => {
  test('an unlisted name gets 403 from the HTTP proxy, REP 0x02 over SOCKS5, and 403 to CONNECT', async () => {
    await start()
    const plain = await curl(['--proxy', proxyUrl(), '--include', 'http://evil.example/steal'])
    expect(plain.stdout).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/)
    expect(plain.stdout).toContain('X-Tend-Blocked: not on the allowlist\r\n')
    expect(plain.stdout.endsWith('\r\n\r\ntend: blocked evil.example:80 (not on the allowlist)\n')).toBe(true)
    expect([...(await socksConnect(socksDomain(0x01, 'evil.example', 443))).subarray(0, 2)]).toEqual([0x05, 0x02])
    const tunnel = await curl(['--proxy', proxyUrl(), 'https://evil.example/'])
    expect(tunnel.code).not.toBe(0)
    expect(tunnel.stderr).toContain('403')
    const recorded = await decisions(3)
    expect(recorded.map((d) => [d.name, d.port, d.via, d.decision, d.reason, d.sentBytes, d.receivedBytes])).toEqual([
      ['evil.example', 80, 'http', 'blocked', 'not on the allowlist', 0, 0],
      ['evil.example', 443, 'socks', 'blocked', 'not on the allowlist', 0, 0],
      ['evil.example', 443, 'connect', 'blocked', 'not on the allowlist', 0, 0],
    ])
    expect(engine.resolved).toEqual([])
    expect(http.seen.length + https.seen.length).toBe(0)
  })

  test('an allowed name on a port not listed for it is refused', async () => {
    await start()
    const result = await curl(['--proxy', proxyUrl(), '--include', `http://allowed.example:${bannerPort + 1}/`])
    expect(result.stdout).toContain('X-Tend-Blocked: not on the allowlist')
    expect((await decisions(1))[0]).toMatchObject({ name: 'allowed.example', port: bannerPort + 1, decision: 'blocked' })
  })

  test('an IP literal is refused unless an allowlist entry is that address and port', async () => {
    await start()
    const refused = await curl(['--proxy', proxyUrl(), '--include', `http://127.0.0.1:${httpPort}/`])
    expect(refused.stdout).toContain('X-Tend-Blocked: an IP address not on the allowlist')
    const socks = Buffer.from([0x05, 0x01, 0x00, 0x01, 127, 0, 0, 1, httpPort >> 8, httpPort & 0xff])
    expect([...(await socksConnect(socks)).subarray(0, 2)]).toEqual([0x05, 0x02])
    // parseAllowEntry refuses internal addresses, so the entry is built as the engine receives entries: parsed, typed.
    engine.state.task = { id: 'task-1', network: 'allow', allow: [{ kind: 'address', text: `127.0.0.1:${httpPort}`, address: '127.0.0.1', ports: [httpPort] }] }
    const listed = await curl(['--proxy', proxyUrl(), `http://127.0.0.1:${httpPort}/listed`])
    expect(listed.stdout).toBe(`upstream saw GET /listed host=127.0.0.1:${httpPort}`)
    const other = await curl(['--proxy', proxyUrl(), '--include', `http://127.0.0.2:${httpPort}/`])
    expect(other.stdout).toContain('X-Tend-Blocked: an IP address not on the allowlist')
    const recorded = await decisions(4)
    expect(recorded.map((d) => [d.name, d.via, d.decision, d.reason])).toEqual([
      ['127.0.0.1', 'http', 'blocked', 'an IP address not on the allowlist'],
      ['127.0.0.1', 'socks', 'blocked', 'an IP address not on the allowlist'],
      ['127.0.0.1', 'http', 'allowed', undefined],
      ['127.0.0.2', 'http', 'blocked', 'an IP address not on the allowlist'],
    ])
  })

  test('a TLS ClientHello naming another host than the CONNECT is refused (no domain fronting)', async () => {
    await start()
    const fronted = await tlsThroughConnect(`allowed.example:${httpsPort}`, 'other.example')
    expect(fronted).toEqual({ statusLine: '200', handshake: 'ended' })
    const same = await tlsThroughConnect(`allowed.example:${httpsPort}`, 'allowed.example')
    expect(same).toEqual({ statusLine: '200', handshake: 'secure' })
    const recorded = await decisions(2)
    expect(recorded[0]).toMatchObject({
      name: 'allowed.example',
      port: httpsPort,
      via: 'connect',
      decision: 'blocked',
      reason: 'TLS names other.example, not allowed.example',
    })
    expect(recorded[1]).toMatchObject({ name: 'allowed.example', via: 'connect', decision: 'allowed' })
  })

  test('a TLS ClientHello naming another host than a transparent connection stands for is refused', async () => {
    await start()
    Object.assign(engine.state, { transparentName: 'allowed.example', transparentPort: httpsPort })
    const result = await curl([
      '--connect-to',
      `other.example:${httpsPort}:127.0.0.1:${engine.transparentPort}`,
      '--cacert',
      await certFile(),
      `https://other.example:${httpsPort}/`,
    ])
    expect(result.code).not.toBe(0)
    expect(result.stdout).toBe('')
    expect((await decisions(1))[0]).toMatchObject({
      name: 'allowed.example',
      via: 'transparent',
      decision: 'blocked',
      reason: 'TLS names other.example, not allowed.example',
    })
    expect(https.seen.every((connection) => connection.read() === 0)).toBe(true)
  })

  test('plain HTTP on a transparent connection: every keep-alive request must name the host in Host', async () => {
    await start()
    Object.assign(engine.state, { transparentName: 'allowed.example', transparentPort: httpPort })
    const client = rawConnection(engine.transparentPort)
    client.socket.write(`GET /first HTTP/1.1\r\nHost: allowed.example:${httpPort}\r\n\r\n`)
    await waitFor('the first answer', () => client.text().includes(`upstream saw GET /first host=allowed.example:${httpPort}`))
    client.socket.write(`GET /second HTTP/1.1\r\nHost: other.example\r\n\r\n`)
    await waitFor('the second answer', () => client.text().includes('tend: blocked'))
    expect(client.text()).toContain('X-Tend-Blocked: Host names other.example, not allowed.example\r\n')
    client.socket.write(`GET http://other.example:${httpPort}/third HTTP/1.1\r\nHost: allowed.example:${httpPort}\r\nConnection: close\r\n\r\n`)
    await waitFor('the third answer and the end', () => client.ended())
    expect(client.text().match(/HTTP\/1\.1 403/g)).toHaveLength(2)
    expect(client.text()).not.toContain('/second')
    expect(client.text()).not.toContain('/third')
    const recorded = await decisions(3)
    expect(recorded.map((d) => [d.name, d.via, d.decision, d.reason])).toEqual([
      ['allowed.example', 'transparent', 'allowed', undefined],
      ['other.example', 'transparent', 'blocked', 'Host names other.example, not allowed.example'],
      ['other.example', 'transparent', 'blocked', 'Host names other.example, not allowed.example'],
    ])
  })

  test('plain HTTP inside a CONNECT tunnel is held to the CONNECT host too', async () => {
    await start()
    const client = rawConnection(engine.proxyPort)
    client.socket.write(`CONNECT allowed.example:${httpPort} HTTP/1.1\r\nHost: allowed.example:${httpPort}\r\n\r\n`)
    await waitFor('the tunnel', () => client.text().startsWith('HTTP/1.1 200'))
    client.socket.write(
      `GET /in HTTP/1.1\r\nHost: allowed.example:${httpPort}\r\n\r\nGET /fronted HTTP/1.1\r\nHost: other.example\r\nConnection: close\r\n\r\n`,
    )
    await waitFor('both answers and the end', () => client.ended())
    expect(client.text()).toContain(`upstream saw GET /in host=allowed.example:${httpPort}`)
    expect(client.text()).toContain('tend: blocked other.example:')
    expect(client.text()).not.toContain('/fronted')
  })

  test('a client that ends its side after the request still gets the answer (HTTP/1.0 style)', async () => {
    await start()
    const client = rawConnection(engine.proxyPort)
    client.socket.end(`GET http://allowed.example:${httpPort}/half HTTP/1.0\r\nHost: allowed.example:${httpPort}\r\n\r\n`)
    await waitFor('the answer and the end', () => client.ended())
    expect(client.text()).toContain(`upstream saw GET /half host=allowed.example:${httpPort}`)
    Object.assign(engine.state, { transparentName: 'allowed.example', transparentPort: httpPort })
    const transparent = rawConnection(engine.transparentPort)
    transparent.socket.end(`GET /half HTTP/1.0\r\nHost: allowed.example:${httpPort}\r\n\r\n`)
    await waitFor('the transparent answer and the end', () => transparent.ended())
    expect(transparent.text()).toContain(`upstream saw GET /half host=allowed.example:${httpPort}`)
  })

  test('the absolute URI and the Host header of a proxy request must agree', async () => {
    await start()
    const client = rawConnection(engine.proxyPort)
    client.socket.write(`GET http://allowed.example:${httpPort}/ HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n`)
    await waitFor('the answer and the end', () => client.ended())
    expect(client.text()).toContain('X-Tend-Blocked: Host names evil.example, not allowed.example\r\n')
    expect(http.seen).toHaveLength(0)
  })

  test('a loopback task reaches no host, whatever its allowlist', async () => {
    await start({ task: task([`allowed.example:${httpPort}`], 'loopback') })
    const result = await curl(['--proxy', proxyUrl(), '--include', `http://allowed.example:${httpPort}/`])
    expect(result.stdout).toContain('X-Tend-Blocked: network loopback reaches no host')
    Object.assign(engine.state, { transparentName: 'allowed.example', transparentPort: httpPort })
    const transparent = rawConnection(engine.transparentPort)
    await waitFor('the transparent connection ended', () => transparent.ended())
    const recorded = await decisions(2)
    expect(recorded.map((d) => [d.via, d.decision, d.reason])).toEqual([
      ['http', 'blocked', 'network loopback reaches no host'],
      ['transparent', 'blocked', 'network loopback reaches no host'],
    ])
    expect(http.seen).toHaveLength(0)
  })

  test('an unreachable upstream answers 502 and is recorded as allowed with the error', async () => {
    await start()
    const result = await curl(['--proxy', proxyUrl(), '--include', `http://closed.example:${closedPort}/`])
    expect(result.stdout).toMatch(/^HTTP\/1\.1 502 /)
    expect(result.stdout).toContain(`tend: closed.example:${closedPort} could not be reached (ECONNREFUSED)`)
    expect((await decisions(1))[0]).toMatchObject({ name: 'closed.example', decision: 'allowed', error: 'ECONNREFUSED', sentBytes: 0, receivedBytes: 0 })
  })

  test('SOCKS5 with an IPv6 address: refused unless listed, then carried to that address', async () => {
    const v6 = echoHttp()
    const v6Port = await listening(v6, '::1')
    try {
      await start()
      const request = Buffer.concat([Buffer.from([0x05, 0x01, 0x00, 0x04]), Buffer.from([...Array(15).fill(0), 1]), Buffer.from([v6Port >> 8, v6Port & 0xff])])
      expect([...(await socksConnect(request)).subarray(0, 2)]).toEqual([0x05, 0x02])
      engine.state.task = { id: 'task-1', network: 'allow', allow: [{ kind: 'address', text: `[::1]:${v6Port}`, address: '::1', ports: [v6Port] }] }
      const result = await curl(['--socks5', `127.0.0.1:${engine.proxyPort}`, `http://[::1]:${v6Port}/six`])
      expect(result.stdout).toBe(`upstream saw GET /six host=[::1]:${v6Port}`)
      const recorded = await decisions(2)
      expect(recorded.map((d) => [d.name, d.port, d.via, d.decision, d.address])).toEqual([
        ['::1', v6Port, 'socks', 'blocked', undefined],
        ['::1', v6Port, 'socks', 'allowed', '::1'],
      ])
    } finally {
      await closeServer(v6)
    }
  })

  test('SOCKS5 answers an unsupported command with REP 0x07, recording nothing', async () => {
    await start()
    expect([...(await socksConnect(socksDomain(0x02, 'allowed.example', httpPort))).subarray(0, 2)]).toEqual([0x05, 0x07])
    expect(engine.decisions).toEqual([])
  })

  test('a connection no task is found for is closed and nothing is recorded', async () => {
    await start({ task: null })
    const client = rawConnection(engine.proxyPort)
    client.socket.write(`GET http://allowed.example:${httpPort}/ HTTP/1.1\r\nHost: allowed.example:${httpPort}\r\n\r\n`)
    await waitFor('the connection closed', () => client.ended())
    expect(client.text()).toBe('')
    expect(engine.decisions).toEqual([])
  })

  test('close() ends the connections the proxy holds', async () => {
    await start()
    Object.assign(engine.state, { transparentName: 'allowed.example', transparentPort: bannerPort })
    const client = rawConnection(engine.transparentPort)
    await waitFor('the banner', () => client.text().startsWith('SSH-2.0'))
    engine.proxy.close()
    await waitFor('the task side closed', () => client.ended())
    await waitFor('the upstream side closed', () => banner.seen.at(-1)!.socket.closed)
  })
})

describe('carrying bytes', () => {
  test('32 MiB each way through a CONNECT tunnel arrive whole and in order, and the record counts them', async () => {
    const { createHash, randomBytes } = await import('node:crypto')
    const download = randomBytes(32 * 1024 * 1024)
    const upload = randomBytes(32 * 1024 * 1024)
    // Random bytes that begin like a TLS record (0x16, about one run in 256) are judged as a broken
    // ClientHello and refused, rightly: this test's bytes begin as binary data that is neither.
    upload[0] = 0x00
    let uploadHash = ''
    const bulk = tracked(
      createServer((socket) => {
        socket.on('error', () => undefined)
        const hash = createHash('sha256')
        let left = upload.length
        socket.on('data', (chunk: Buffer) => {
          hash.update(chunk)
          left -= chunk.length
          if (left === 0) {
            uploadHash = hash.digest('hex')
            socket.end(download)
          }
        })
      }),
    )
    const bulkPort = await listening(bulk)
    try {
      await start({ task: task([`allowed.example:${bulkPort}`]) })
      const client = rawConnection(engine.proxyPort)
      client.socket.write(`CONNECT allowed.example:${bulkPort} HTTP/1.1\r\n\r\n`)
      const established = 'HTTP/1.1 200 Connection Established\r\n\r\n'
      await waitFor('the tunnel', () => client.text() === established)
      client.socket.end(upload)
      await waitFor('the download and the end', () => client.ended(), 30_000)
      const received = client.received().subarray(established.length)
      expect(received.length).toBe(download.length)
      expect(received.equals(download)).toBe(true)
      expect(uploadHash).toBe(createHash('sha256').update(upload).digest('hex'))
      const [decision] = await decisions(1)
      expect({ sentBytes: decision!.sentBytes, receivedBytes: decision!.receivedBytes }).toEqual({ sentBytes: upload.length, receivedBytes: download.length })
    } finally {
      await closeServer(bulk)
    }
  })
})

describe('first bytes a server might read otherwise', () => {
  test('a request with two Host headers reaches the upstream with the checked one only, or not at all', async () => {
    await start()
    Object.assign(engine.state, { transparentName: 'allowed.example', transparentPort: httpPort })
    const client = rawConnection(engine.transparentPort)
    client.socket.write(`GET /dup HTTP/1.1\r\nHost: allowed.example:${httpPort}\r\nHost: other.example\r\nConnection: close\r\n\r\n`)
    await waitFor('the answer and the end', () => client.ended())
    expect(client.text()).not.toContain('Host headers')
    expect(client.text()).not.toContain('other.example')
    const proxied = rawConnection(engine.proxyPort)
    proxied.socket.write(
      `GET http://allowed.example:${httpPort}/dup HTTP/1.1\r\nHost: allowed.example:${httpPort}\r\nHost: other.example\r\nConnection: close\r\n\r\n`,
    )
    await waitFor('the proxied answer and the end', () => proxied.ended())
    expect(proxied.text()).not.toContain('Host headers')
    expect(proxied.text()).not.toContain('other.example')
  })

  test('empty lines before a request line do not hide the request from the Host check', async () => {
    await start()
    Object.assign(engine.state, { transparentName: 'allowed.example', transparentPort: httpPort })
    const client = rawConnection(engine.transparentPort)
    client.socket.write(`\r\n\r\nGET /hidden HTTP/1.1\r\nHost: other.example\r\nConnection: close\r\n\r\n`)
    await waitFor('the connection ended', () => client.ended())
    expect(client.text()).not.toContain('upstream saw')
    expect((await decisions(1))[0]).toMatchObject({ decision: 'blocked', reason: 'Host names other.example, not allowed.example' })
  })

  test('a TLS record that is no ClientHello first (an alert, a ChangeCipherSpec) is refused, not piped', async () => {
    await start()
    Object.assign(engine.state, { transparentName: 'allowed.example', transparentPort: httpsPort })
    for (const record of [Buffer.from([0x15, 0x03, 0x03, 0x00, 0x02, 0x01, 0x00]), Buffer.from([0x14, 0x03, 0x03, 0x00, 0x01, 0x01])]) {
      const client = rawConnection(engine.transparentPort)
      client.socket.write(record)
      await waitFor('the connection ended', () => client.ended())
    }
    const recorded = await decisions(2)
    expect(recorded.map((d) => d.decision)).toEqual(['blocked', 'blocked'])
    expect(https.seen.every((connection) => connection.read() === 0)).toBe(true)
  })

  test('a ClientHello split over TLS records and TCP writes is still read whole', async () => {
    await start()
    Object.assign(engine.state, { transparentName: 'allowed.example', transparentPort: httpsPort })
    const hello = await clientHello('other.example')
    const body = hello.subarray(5)
    const records = Buffer.concat([...body].map((byte) => Buffer.from([0x16, 0x03, 0x01, 0x00, 0x01, byte])))
    const client = rawConnection(engine.transparentPort)
    for (let offset = 0; offset < records.length; offset += 7) {
      client.socket.write(records.subarray(offset, offset + 7))
      await new Promise((resolve) => setImmediate(resolve))
    }
    await waitFor('the connection ended', () => client.ended())
    expect((await decisions(1))[0]).toMatchObject({ decision: 'blocked', reason: 'TLS names other.example, not allowed.example' })
    expect(https.seen.every((connection) => connection.read() === 0)).toBe(true)
  })
})

describe('addresses the engine found itself', () => {
  test('a name resolving to a public and an internal address is refused', async () => {
    await start({ resolve: async () => ['192.0.2.7', '::ffff:127.0.0.1'] })
    const result = await curl(['--proxy', proxyUrl(), '--include', `http://loopy.example:${httpPort}/`])
    expect(result.stdout).toContain('X-Tend-Blocked: resolves to ::ffff:127.0.0.1, an internal address')
    expect(http.seen).toHaveLength(0)
  })

  test('the engine connects to the address it checked: one lookup per connection, never a second one', async () => {
    const answers = [['192.0.2.7'], ['127.0.0.1']]
    // 192.0.2.7 (TEST-NET-1) answers nothing here: the connect fails fast, by its own timeout at worst.
    await start({ resolve: async () => answers.shift() ?? ['127.0.0.1'], connectTimeoutMs: 300 })
    const result = await curl(['--proxy', proxyUrl(), '--include', `http://loopy.example:${httpPort}/`])
    expect(result.stdout).toMatch(/^HTTP\/1\.1 502 /)
    expect(engine.resolved).toEqual(['loopy.example'])
    expect(http.seen).toHaveLength(0)
    const [decision] = await decisions(1)
    expect(decision).toMatchObject({ name: 'loopy.example', decision: 'allowed' })
    expect(decision!.error).toMatch(/^E[A-Z]+$/)
    expect(decision!.address).toBeUndefined()
  })
})
