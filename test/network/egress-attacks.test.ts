import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { createServer, type Socket } from 'node:net'
import { allowingEntry, allowsName, parseAllowEntry } from '../../daemon/network/allowlist.js'
import { DnsStub, SyntheticAddresses, type Decision, type EgressTask } from '../../daemon/network/egress/index.js'
import { waitFor } from '../helpers/wait-for.js'
import { clientHello, closeServer, echoHttp, listening, parsedAllow, rawConnection, startProxy, tracked } from './egress-harness.js'

/*
 * Routes around the egress proxy found by an adversarial pass, each a variant the first tests did
 * not name: a NUL byte or a dot inside a name (cut short by the resolver, or matched against a
 * wildcard's tail), empty lines before a request on a bound connection, a second Host in another
 * case, a TLS record whose version byte is not 3, and allowlist entries that lead inside.
 */

const http = echoHttp()
let httpPort: number
type Proxy = Awaited<ReturnType<typeof startProxy>>
let proxy: Proxy | undefined

beforeAll(async () => {
  httpPort = await listening(http)
})
afterAll(async () => {
  await closeServer(http)
})
afterEach(async () => {
  await proxy?.stop()
  proxy = undefined
})

function task(patterns: readonly string[]): EgressTask {
  return { id: 'task-1', network: 'allow', allow: parsedAllow(patterns) }
}

async function start(patterns: readonly string[]): Promise<Proxy> {
  proxy = await startProxy({ task: task(patterns), hosts: { 'up.test': '127.0.0.1' }, resolve: async () => ['127.0.0.1'] })
  return proxy
}

async function decided(count: number): Promise<Decision[]> {
  await waitFor(`${count} decision(s)`, () => proxy!.decisions.length >= count)
  return proxy!.decisions.map((entry) => entry.decision)
}

describe('names are names', () => {
  test('a NUL byte, a dot or a space inside a label never matches an entry, a wildcard included', () => {
    const entries = parsedAllow(['*.up.test', 'up.test'])
    for (const name of ['192.0.2.2\0.up.test', 'evil.example\0.up.test', 'a b.up.test', 'up.test\0', 'up.test\n']) {
      expect(allowingEntry(entries, name, 443), JSON.stringify(name)).toBeNull()
      expect(allowsName(entries, name), JSON.stringify(name)).toBe(false)
    }
    expect(allowingEntry(entries, 'a.up.test', 443)).not.toBeNull()
  })

  test('SOCKS5: a name with a NUL under an allowed wildcard is refused, and never looked up', async () => {
    const engine = await start(['*.up.test:80'])
    const client = rawConnection(engine.proxyPort)
    const name = Buffer.from('secret-token.attacker.example\0.up.test', 'latin1')
    client.socket.write(Buffer.from([5, 1, 0]))
    await waitFor('the greeting answered', () => client.received().length >= 2)
    client.socket.write(Buffer.concat([Buffer.from([5, 1, 0, 3, name.length]), name, Buffer.from([0, 80])]))
    await waitFor('the request answered', () => client.received().length >= 4 || client.ended())
    expect(client.received()[3]).not.toBe(0)
    expect(client.received().subarray(2)[1]).not.toBe(0)
    expect(engine.resolved).toEqual([])
    client.socket.destroy()
  })

  test('DNS: a label holding a NUL or a dot is not an allowed name (NXDOMAIN, no address)', async () => {
    const decisions: Decision[] = []
    const listened: string[] = []
    const stub = new DnsStub({
      attribute: async () => task(['*.up.test']),
      record: (_task, decision) => decisions.push(decision),
      addresses: new SyntheticAddresses(async (address) => void listened.push(address)),
    })
    for (const labels of [
      ['192.0.2.2\0', 'up', 'test'],
      ['evil.example', 'up', 'test'],
    ]) {
      const reply = await stub.answerUdp(query(labels), { proto: 'udp', address: '127.0.0.1', port: 5353 }, { address: '127.0.0.1', port: 53 })
      expect(reply, JSON.stringify(labels)).not.toBeNull()
      // RCODE in the low bits of the fourth byte: 3 NXDOMAIN (or 1 FORMERR); never 0 with an answer.
      expect([1, 3]).toContain(reply![3]! & 0x0f)
    }
    expect(listened).toEqual([])
  })
})

describe('HTTP on a bound connection', () => {
  test('empty lines before the request line do not hide the request from the Host check', async () => {
    const engine = await start([`up.test:${httpPort}`])
    const before = http.seen.length
    const client = rawConnection(engine.proxyPort)
    client.socket.write(`CONNECT up.test:${httpPort} HTTP/1.1\r\nHost: up.test:${httpPort}\r\n\r\n`)
    await waitFor('the tunnel', () => client.text().includes('\r\n\r\n'))
    client.socket.write('\r\nGET /fronted HTTP/1.1\r\nHost: evil.example\r\n\r\n')
    await waitFor(
      'an answer or the end',
      () => client.ended() || /upstream saw|HTTP\/1\.1 4\d\d/.test(client.text().split('\r\n\r\n').slice(1).join('\r\n\r\n')),
    )
    expect(client.text()).not.toContain('upstream saw')
    expect(http.seen.slice(before).every((connection) => connection.read() === 0)).toBe(true)
    client.socket.destroy()
  })

  test('a second Host header, in another case, is refused, not forwarded', async () => {
    const engine = await start([`up.test:${httpPort}`])
    const client = rawConnection(engine.proxyPort)
    client.socket.write(`CONNECT up.test:${httpPort} HTTP/1.1\r\nHost: up.test:${httpPort}\r\n\r\n`)
    await waitFor('the tunnel', () => client.text().includes('\r\n\r\n'))
    client.socket.write(`GET / HTTP/1.1\r\nHost: up.test:${httpPort}\r\nhost: evil.example\r\n\r\n`)
    await waitFor(
      'an answer or the end',
      () => client.ended() || /upstream saw|HTTP\/1\.1 4\d\d/.test(client.text().split('\r\n\r\n').slice(1).join('\r\n\r\n')),
    )
    expect(client.text()).not.toContain('host=evil.example')
    client.socket.destroy()
    const absolute = rawConnection(engine.proxyPort)
    absolute.socket.write(`GET http://up.test:${httpPort}/ HTTP/1.1\r\nHost: up.test:${httpPort}\r\nHOST: evil.example\r\n\r\n`)
    await waitFor('an answer or the end', () => absolute.ended() || /upstream saw|HTTP\/1\.1 4\d\d/.test(absolute.text()))
    expect(absolute.text()).not.toContain('evil.example')
    absolute.socket.destroy()
  })
})

describe('TLS', () => {
  test.each([
    [0x03, 0x01],
    [0x02, 0x01],
    [0x00, 0x01],
  ])('a ClientHello in a record of version %i.%i naming another host is refused', async (major, minor) => {
    const engine = await start([`up.test:${httpPort}`])
    const hello = Buffer.from(await clientHello('evil.example'))
    hello[1] = major
    hello[2] = minor
    const client = rawConnection(engine.proxyPort)
    client.socket.write(`CONNECT up.test:${httpPort} HTTP/1.1\r\nHost: up.test:${httpPort}\r\n\r\n`)
    await waitFor('the tunnel', () => client.text().includes('\r\n\r\n'))
    const before = http.seen.length
    client.socket.write(hello)
    await waitFor('the end of the tunnel', () => client.ended())
    const [decision] = await decided(1)
    expect(decision).toMatchObject({ decision: 'blocked' })
    expect(http.seen.slice(before).every((connection) => connection.read() === 0)).toBe(true)
  })
})

describe('allowlist entries that lead inside', () => {
  test.each(['[64:ff9b::7f00:1]', '[::7f00:1]', '[fec0::1]', '[2002:7f00:1::]', '127.1', '0x7f.1', '2130706433', '0177.0.0.1', '127.0.0.1.'])(
    '%s is refused',
    (entry) => {
      expect(parseAllowEntry(entry)).toHaveProperty('problem')
    },
  )
})

/** A query by hand with raw label bytes. */
function query(labels: readonly string[]): Buffer {
  const parts = labels.map((label) => {
    const bytes = Buffer.from(label, 'latin1')
    return Buffer.concat([Buffer.from([bytes.length]), bytes])
  })
  return Buffer.concat([Buffer.from([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]), ...parts, Buffer.from([0, 0, 1, 0, 1])])
}

describe('a second adversarial pass', () => {
  /** Sends `bytes` on a transparent connection standing for up.test:httpPort; resolves with what came back once it ended or answered. */
  async function transparently(engine: Proxy, bytes: readonly Buffer[]): Promise<string> {
    engine.state.transparentName = 'up.test'
    engine.state.transparentPort = httpPort
    const client = rawConnection(engine.transparentPort)
    for (const chunk of bytes) {
      client.socket.write(chunk)
      await new Promise((resolve) => setImmediate(resolve))
    }
    await waitFor('an answer or the end', () => client.ended() || /upstream saw|HTTP\/1\.1 [45]\d\d/.test(client.text()))
    client.socket.destroy()
    return client.text()
  }

  test('any number of empty lines before a request line still leave it to the Host check', async () => {
    const engine = await start([`up.test:${httpPort}`])
    engine.state.transparentName = 'up.test'
    engine.state.transparentPort = httpPort
    const client = rawConnection(engine.transparentPort)
    client.socket.write('\r\n'.repeat(66))
    // The empty lines have been judged (or are still waiting) before the request comes.
    await waitFor('the transparent connection to be taken up', () => engine.decisions.length > 0 || http.seen.length > 0 || client.ended())
    client.socket.write('GET /fronted HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n')
    await waitFor('an answer or the end', () => client.ended() || /upstream saw|HTTP\/1\.1 [45]\d\d/.test(client.text()))
    client.socket.destroy()
    expect(client.text()).not.toContain('upstream saw')
  })

  test.each([
    ['an unknown method', 'FOO / HTTP/1.1\r\nHost: up.test\r\n\r\nGET /fronted HTTP/1.1\r\nHost: evil.example\r\n\r\n'],
    ['a lowercase method', 'get /lower HTTP/1.1\r\nHost: evil.example\r\n\r\n'],
    ['HTTP/2 without TLS (h2c prior knowledge)', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'],
  ])('%s on a bound connection is refused, never piped unchecked', async (_what, request) => {
    const engine = await start([`up.test:${httpPort}`])
    const before = http.seen.length
    const text = await transparently(engine, [Buffer.from(request, 'latin1')])
    expect(text).not.toContain('upstream saw')
    expect(http.seen.slice(before).every((connection) => connection.read() === 0)).toBe(true)
  })

  test('a chunked body on a GET is forwarded framed: a request inside it never reaches the upstream as one', async () => {
    // An upstream that keeps every byte it gets (and answers once the request's end is there).
    const bytes: Buffer[] = []
    const raw = tracked(
      createServer((socket) => {
        socket.on('data', (chunk) => {
          bytes.push(chunk)
          if (Buffer.concat(bytes).includes('0\r\n\r\n')) socket.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok')
        })
      }),
    )
    const rawPort = await listening(raw)
    try {
      const engine = await start([`up.test:${rawPort}`])
      const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: evil.example\r\n\r\n'
      const body = `${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`
      const client = rawConnection(engine.proxyPort)
      client.socket.write(`GET http://up.test:${rawPort}/first HTTP/1.1\r\nHost: up.test:${rawPort}\r\nTransfer-Encoding: chunked\r\n\r\n${body}`)
      await waitFor('the answer', () => /HTTP\/1\.1 \d\d\d/.test(client.text()) || client.ended())
      client.socket.destroy()
      const seen = Buffer.concat(bytes).toString('latin1')
      // The body kept its framing: a server reads the smuggled text as the body, not as a request.
      expect(seen).toMatch(/^GET \/first HTTP\/1\.1\r\n/)
      expect(seen.toLowerCase()).toContain('transfer-encoding: chunked\r\n')
      expect(seen).toContain(`${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`)
    } finally {
      await closeServer(raw)
    }
  })

  test('a ClientHello that hides its real name (encrypted_client_hello) is refused', async () => {
    const engine = await start([`up.test:${httpPort}`])
    const hello = withExtension(await clientHello('up.test'), 0xfe0d, Buffer.alloc(32, 1))
    const client = rawConnection(engine.proxyPort)
    client.socket.write(`CONNECT up.test:${httpPort} HTTP/1.1\r\nHost: up.test:${httpPort}\r\n\r\n`)
    await waitFor('the tunnel', () => client.text().includes('\r\n\r\n'))
    client.socket.write(hello)
    await waitFor('the end of the tunnel', () => client.ended())
    const [decision] = await decided(1)
    expect(decision).toMatchObject({ decision: 'blocked' })
  })

  test.each(['[::ffff:0:7f00:1]', '[::ffff:0:a00:1]', '[2001:0::7f00:1]'])('%s (an IPv4 address carried inside) is refused as an entry', (entry) => {
    expect(parseAllowEntry(entry)).toHaveProperty('problem')
  })
})

/** `hello` (one TLS record holding a ClientHello) with one more extension at the end of its list. */
function withExtension(hello: Buffer, type: number, data: Buffer): Buffer {
  const extension = Buffer.concat([Buffer.from([type >> 8, type & 0xff, data.length >> 8, data.length & 0xff]), data])
  const body = Buffer.from(hello.subarray(9))
  // ClientHello: version 2, random 32, session id, cipher suites, compression, then the extensions' length.
  let offset = 2 + 32
  offset += 1 + body[offset]!
  offset += 2 + body.readUInt16BE(offset)
  offset += 1 + body[offset]!
  const extensions = body.readUInt16BE(offset)
  body.writeUInt16BE(extensions + extension.length, offset)
  const handshake = Buffer.concat([body, extension])
  const header = Buffer.from([0x01, 0, 0, 0])
  header.writeUIntBE(handshake.length, 1, 3)
  const record = Buffer.concat([header, handshake])
  return Buffer.concat([Buffer.from([0x16, hello[1]!, hello[2]!, record.length >> 8, record.length & 0xff]), record])
}

/** A lenient upstream (as Python's http.server is): any first line, any white space, HTTP/0.9 included; answers with the Host it got. */
async function lenientUpstream() {
  const server = tracked(
    createServer((socket) => {
      let text = ''
      socket.on('data', (chunk) => {
        text += chunk.toString('latin1')
        if (!text.includes('\r\n\r\n')) return
        const host = /^host:\s*(.*)$/im.exec(text)?.[1] ?? ''
        socket.end(`HTTP/1.1 200 OK\r\nContent-Length: ${14 + host.length}\r\n\r\nupstream saw ${host}`)
      })
    }),
  )
  return { server, port: await listening(server) }
}

describe('a third adversarial pass', () => {
  test.each([
    ['two spaces', 'GET  / HTTP/1.1\r\nHost: evil.example\r\n\r\n'],
    ['a leading space', ' GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n'],
    ['tabs', 'GET\t/\tHTTP/1.1\r\nHost: evil.example\r\n\r\n'],
    ['a space inside the target', 'GET /a b HTTP/1.1\r\nHost: evil.example\r\n\r\n'],
  ])('a request line with %s (which lenient servers read) never reaches the upstream unchecked', async (_what, request) => {
    const { server: lenient, port: lenientPort } = await lenientUpstream()
    try {
      const engine = await start([`up.test:${lenientPort}`])
      engine.state.transparentName = 'up.test'
      engine.state.transparentPort = lenientPort
      const client = rawConnection(engine.transparentPort)
      client.socket.write(request)
      await waitFor('an answer or the end', () => client.ended() || /upstream saw|HTTP\/1\.1 [45]\d\d/.test(client.text()))
      client.socket.destroy()
      expect(client.text()).not.toContain('upstream saw')
    } finally {
      await closeServer(lenient)
    }
  })
})

describe('a first line that comes in pieces', () => {
  test('a long first word sent alone, then the rest of a request line, is still checked', async () => {
    const engine = await start([`up.test:${httpPort}`])
    engine.state.transparentName = 'up.test'
    engine.state.transparentPort = httpPort
    const client = rawConnection(engine.transparentPort)
    client.socket.write('G'.repeat(40))
    await new Promise((resolve) => setImmediate(resolve))
    client.socket.write(' / HTTP/1.1\r\nHost: evil.example\r\n\r\n')
    await waitFor('an answer or the end', () => client.ended() || /upstream saw|HTTP\/1\.1 [45]\d\d/.test(client.text()))
    client.socket.destroy()
    expect(client.text()).not.toContain('upstream saw')
  })
})

describe('a fourth adversarial pass', () => {
  test.each([
    ['an HTTP/0.9 request line', ['GET /x\r\nHost: evil.example\r\n\r\n']],
    ['an HTTP/0.9 request with an absolute URI', ['GET http://evil.example/abs\r\nHost: evil.example\r\n\r\n']],
    ['a vertical tab sent alone first', ['\x0b', 'GET /ws HTTP/1.1\r\nHost: evil.example\r\n\r\n']],
    ['a form feed sent alone first', ['\x0c', 'GET /ws HTTP/1.1\r\nHost: evil.example\r\n\r\n']],
    ['a no-break space sent alone first', ['\xa0', 'GET /ws HTTP/1.1\r\nHost: evil.example\r\n\r\n']],
    ['a file separator sent alone first', ['\x1c', 'GET /ws HTTP/1.1\r\nHost: evil.example\r\n\r\n']],
  ])('%s never reaches a lenient upstream unchecked', async (_what, pieces) => {
    const { server, port } = await lenientUpstream()
    try {
      const engine = await start([`up.test:${port}`])
      engine.state.transparentName = 'up.test'
      engine.state.transparentPort = port
      const client = rawConnection(engine.transparentPort)
      for (const piece of pieces) {
        client.socket.write(Buffer.from(piece, 'latin1'))
        await waitFor('the piece to be judged', () => engine.decisions.length > 0 || server.seen.length > 0 || client.ended() || piece === pieces.at(-1))
      }
      await waitFor('an answer or the end', () => client.ended() || /upstream saw|HTTP\/1\.1 [45]\d\d/.test(client.text()))
      client.socket.destroy()
      expect(client.text()).not.toContain('upstream saw')
    } finally {
      await closeServer(server)
    }
  })

  test('an ssh client banner, a Redis inline command and binary data are still carried as they are', async () => {
    const { server, port } = await lenientUpstream()
    const echo = tracked(createServer((socket) => socket.on('data', (chunk) => socket.write(chunk))))
    const echoPort = await listening(echo)
    try {
      const engine = await start([`up.test:${echoPort}`])
      engine.state.transparentName = 'up.test'
      engine.state.transparentPort = echoPort
      for (const first of ['SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n', 'PING\r\n', 'GET somekey\r\n', '\x00\x01binary']) {
        const client = rawConnection(engine.transparentPort)
        client.socket.write(first)
        await waitFor(`${JSON.stringify(first)} echoed`, () => client.text() === first)
        client.socket.destroy()
      }
    } finally {
      await Promise.all([closeServer(server), closeServer(echo)])
    }
  })
})
