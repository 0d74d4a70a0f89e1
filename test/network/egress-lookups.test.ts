import { afterAll, beforeAll, expect, test } from 'vitest'
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createSocket, type Socket as UdpSocket } from 'node:dgram'
import { createServer, type Socket } from 'node:net'
import { join } from 'node:path'
import { execa } from 'execa'
import { startTestDaemon, TEND_BIN, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { closeServer, listening, tracked } from './egress-harness.js'

/*
 * The proxy's name lookups are its own, and one owner's cannot hold up another's: a daemon whose
 * DNS server never answers (a private /etc/resolv.conf naming a silent one) serves an owner's
 * name from /etc/hosts at once while another owner floods it with names that never resolve.
 */

const base = mkdtempSync('/var/tmp/tend-egress-lookups-')
chmodSync(base, 0o711)
const q = (text: string) => `'${text.replaceAll("'", "'\\''")}'`
let daemon: TestDaemon
let silent: UdpSocket
const upstream = tracked(createServer((socket: Socket) => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok')))
let upstreamPort: number

beforeAll(async () => {
  upstreamPort = await listening(upstream)
  // A DNS server that takes every query and answers none.
  silent = createSocket('udp4')
  silent.on('message', () => {})
  // Port 53: resolv.conf names no port (glibc takes none); the tests run as root.
  await new Promise<void>((resolve) => silent.bind(53, '127.0.0.2', () => resolve()))
  const resolvConf = join(base, 'resolv.conf')
  writeFileSync(resolvConf, 'nameserver 127.0.0.2\n')
  const hosts = join(base, 'hosts')
  writeFileSync(hosts, `127.0.0.1 localhost\n127.0.0.1 bob.slow.test\n`)
  chmodSync(resolvConf, 0o644)
  chmodSync(hosts, 0o644)
  // The daemon in a mount namespace of its own, where these two files are the system's.
  const launcher = [
    'unshare',
    '-m',
    '--propagation',
    'private',
    'sh',
    '-c',
    `mount --bind ${q(resolvConf)} /etc/resolv.conf && mount --bind ${q(hosts)} /etc/hosts && exec "$@"`,
    'launcher',
  ]
  daemon = await startTestDaemon({ launcher, env: { TEND_SANDBOX: 'workspace', TEND_NETWORK_ALLOW: `*.slow.test:${upstreamPort}` } })
})
afterAll(async () => {
  await daemon?.stop()
  silent?.close()
  await closeServer(upstream)
  rmSync(base, { recursive: true, force: true })
})

/** The CLI, from inside the daemon's mount namespace (the daemon refuses callers outside it). */
async function cli(args: string[], timeoutMs = 30_000) {
  return execa('nsenter', ['-t', String(daemon.process.pid), '-m', '--', process.execPath, TEND_BIN, ...args], {
    env: daemon.env,
    extendEnv: false,
    reject: false,
    timeout: timeoutMs,
    stdin: 'ignore',
  })
}

test("one owner's lookups that never get an answer do not hold up another owner's", async () => {
  const cwd = mkdtempSync(join(base, 'ws-'))
  chmodSync(cwd, 0o777)
  const flood = [
    'import socket, random, threading',
    'def ask(i):',
    '    s = socket.create_connection(("127.0.0.1", 1023))',
    `    s.sendall(b"CONNECT x%d-%d.slow.test:${upstreamPort} HTTP/1.1\\r\\n\\r\\n" % (i, random.randrange(10**9)))`,
    '    try: s.recv(100)',
    '    except OSError: pass',
    'threads = [threading.Thread(target=ask, args=(i,)) for i in range(100)]',
    'for t in threads: t.start()',
    'print("flooding", flush=True)',
    'for t in threads: t.join()',
  ].join('\n')
  const started = await cli(['run', '--owner', 'mallory', '--network', 'allow', '--cwd', cwd, '--timeout', '2m', '--', 'python3', '-u', '-c', flood])
  expect(started.exitCode, started.stderr).toBe(0)
  const mallory = String(started.stdout).trim()
  await waitFor('the flood to start', async () => String((await cli(['logs', mallory])).stdout).includes('flooding'), 30_000)
  // Through the thread pool, bob's lookup waited behind mallory's (minutes); now it does not wait at all.
  const bob = await cli(
    ['run', '--wait', '--owner', 'bob', '--network', 'allow', '--cwd', cwd, '--', 'curl', '-sS', '--max-time', '20', `http://bob.slow.test:${upstreamPort}/`],
    15_000,
  )
  expect(bob.timedOut, 'bob waited behind the flood').toBe(false)
  // His name was looked up, at once: /etc/hosts has it (at an internal address, which the proxy then refuses).
  expect(String(bob.stdout)).toMatch(/^tend: blocked bob\.slow\.test:\d+ \(resolves to 127\.0\.0\.1, an internal address/)
  await cli(['kill', mallory])
})
