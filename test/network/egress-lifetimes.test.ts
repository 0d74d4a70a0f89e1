import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Socket } from 'node:net'
import { join } from 'node:path'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { closeServer, echoHttp, listening, tracked } from './egress-harness.js'

/*
 * A task's connections through tend end with it. A connection an allow task hands to another
 * process (a loopback task of its owner, over a Unix socket) is cut when the allow task ends, and
 * a relayed connection whose upstream never reads nor closes does not keep the daemon's thread
 * and descriptors once its task is gone.
 */

const base = mkdtempSync('/var/tmp/tend-egress-lifetimes-')
chmodSync(base, 0o711)
const q = (text: string) => `'${text.replaceAll("'", "'\\''")}'`
let daemon: TestDaemon
let cwd: string
const http = echoHttp()
let httpPort: number
// Accepts, reads nothing, never closes.
const sink = tracked(createServer((socket: Socket) => socket.pause()))
let sinkPort: number

beforeAll(async () => {
  ;[httpPort, sinkPort] = await Promise.all([listening(http), listening(sink)])
  daemon = await startTestDaemon({
    env: {
      TEND_SANDBOX: 'workspace',
      TEND_NETWORK_HOSTS: 'up.test=127.0.0.1,sink.test=127.0.0.1',
      TEND_NETWORK_ALLOW: `up.test:${httpPort},sink.test:${sinkPort}`,
    },
  })
})
afterAll(async () => {
  await daemon?.stop()
  await Promise.all([closeServer(http), closeServer(sink)])
  rmSync(base, { recursive: true, force: true })
})

function workspace(): string {
  const folder = mkdtempSync(join(base, 'ws-'))
  chmodSync(folder, 0o777)
  return folder
}

async function output(id: string): Promise<string> {
  return (await daemon.client.read(id)).data
}

test('a proxy connection handed to a loopback task is cut when the allow task that made it ends', async () => {
  cwd = workspace()
  const name = `tend-pass-${process.pid}-${Date.now()}`
  const receiver = [
    'import socket, array, os, time',
    'server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)',
    `server.bind("\\0${name}")`,
    'server.listen(1)',
    'print("listening", flush=True)',
    'conn, _ = server.accept()',
    'fds = array.array("i")',
    'msg, anc, flags, addr = conn.recvmsg(1, socket.CMSG_LEN(4))',
    'fds.frombytes(anc[0][2][:4])',
    'proxy = socket.socket(fileno=fds[0])',
    'print("received", flush=True)',
    'while not os.path.exists("go"): time.sleep(0.05)',
    'proxy.settimeout(10)',
    'try:',
    `    proxy.sendall(b"GET http://up.test:${httpPort}/after-the-end HTTP/1.1\\r\\nHost: up.test:${httpPort}\\r\\n\\r\\n")`,
    '    got = proxy.recv(4096)',
    '    print("answer:", got[:60], flush=True)',
    'except OSError as error:',
    '    print("cut:", error, flush=True)',
  ].join('\n')
  const sender = [
    'import socket, array',
    'proxy = socket.create_connection(("127.0.0.1", 1023))',
    // A first request of its own: the connection is the allow task's from then on.
    `proxy.sendall(b"GET http://up.test:${httpPort}/first HTTP/1.1\\r\\nHost: up.test:${httpPort}\\r\\n\\r\\n")`,
    'print(proxy.recv(4096)[:12], flush=True)',
    'unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)',
    `unix.connect("\\0${name}")`,
    'unix.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [proxy.fileno()]))])',
    'print("sent", flush=True)',
  ].join('\n')
  const loopback = await daemon.client.start({
    command: `exec python3 -u -c ${q(receiver)}`,
    shell: true,
    cwd,
    owner: 'passer',
    network: 'loopback',
    timeoutMs: 60_000,
  })
  await waitFor('the receiver to listen', async () => (await output(loopback.id)).includes('listening'), 20_000)
  const allow = await daemon.client.start({
    command: `exec python3 -u -c ${q(sender)}`,
    shell: true,
    cwd,
    owner: 'passer',
    network: 'allow',
    timeoutMs: 60_000,
  })
  const ended = await daemon.client.wait(allow.id, { timeoutMs: 30_000 })
  expect(ended).toMatchObject({ state: 'exited', exitCode: 0 })
  expect(await output(allow.id)).toBe("b'HTTP/1.1 200'\nsent\n")
  await waitFor('the receiver to hold the connection', async () => (await output(loopback.id)).includes('received'), 20_000)
  writeFileSync(join(cwd, 'go'), '')
  const finished = await daemon.client.wait(loopback.id, { timeoutMs: 30_000 })
  const said = await output(loopback.id)
  expect(finished.state, said).toBe('exited')
  expect(said).not.toContain('upstream saw')
  expect(said).toMatch(/answer: b''|cut:/)
  // The allow task's record holds its one request, and nothing after its end.
  expect((await daemon.client.get(allow.id)).networkUse?.allowed).toBe(1)
})

test('a connection whose task ends while it is still being looked up is refused, not served as the ended task', async () => {
  const folder = workspace()
  const name = `tend-race-${process.pid}-${Date.now()}`
  // The receiver's many descriptors make the lookup of who holds the connection slow: the allow
  // task hands the connection over and ends meanwhile.
  const receiver = [
    'import socket, os, time',
    'server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)',
    `server.bind("\\0${name}")`,
    'server.listen(1)',
    'for i in range(60):',
    '    if os.fork() == 0:',
    '        held = [os.open("/dev/null", os.O_RDONLY) for _ in range(1000)]',
    '        time.sleep(60)',
    '        os._exit(0)',
    'conn, _ = server.accept()',
    'msg, fds, flags, addr = socket.recv_fds(conn, 1, 1)',
    'proxy = socket.socket(fileno=fds[0])',
    'print("received", flush=True)',
    'while not os.path.exists("go"): time.sleep(0.05)',
    'proxy.settimeout(10)',
    'try:',
    `    proxy.sendall(b"GET http://up.test:${httpPort}/stolen HTTP/1.1\\r\\nHost: up.test:${httpPort}\\r\\n\\r\\n")`,
    '    print("answer:", proxy.recv(4096)[:60], flush=True)',
    'except OSError as error:',
    '    print("cut:", error, flush=True)',
    'os.killpg(0, 9)',
  ].join('\n')
  // The allow task comes first (it is looked at first), waits for the receiver, then connects:
  // the lookup finds it, then goes on through the receiver's descriptors while it hands over and ends.
  const sender = [
    'import socket, time',
    'unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)',
    'while True:',
    '    try:',
    `        unix.connect("\\0${name}")`,
    '        break',
    '    except OSError:',
    '        time.sleep(0.05)',
    'proxy = socket.create_connection(("127.0.0.1", 1023))',
    'time.sleep(0.15)',
    'socket.send_fds(unix, [b"x"], [proxy.fileno()])',
    'print("sent", flush=True)',
  ].join('\n')
  const allow = await daemon.client.start({
    command: `exec python3 -u -c ${q(sender)}`,
    shell: true,
    cwd: folder,
    owner: 'racer',
    network: 'allow',
    timeoutMs: 60_000,
  })
  await waitFor('the sender to run', async () => (await daemon.client.get(allow.id)).state === 'running', 30_000)
  const loopback = await daemon.client.start({
    command: `exec python3 -u -c ${q(receiver)}`,
    shell: true,
    cwd: folder,
    owner: 'racer',
    network: 'loopback',
    timeoutMs: 90_000,
  })
  expect(await daemon.client.wait(allow.id, { timeoutMs: 30_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
  await waitFor('the receiver to hold the connection', async () => (await output(loopback.id)).includes('received'), 30_000)
  writeFileSync(join(folder, 'go'), '')
  await daemon.client.wait(loopback.id, { timeoutMs: 60_000 })
  const said = await output(loopback.id)
  expect(said).not.toContain('upstream saw')
  expect(said).toMatch(/answer: b''|cut:/)
  expect((await daemon.client.get(allow.id)).networkUse?.allowed ?? 0).toBe(0)
})

describe('relays', () => {
  test('a relay whose upstream never reads nor closes ends with its task: threads and descriptors come back', async () => {
    const pid = (await daemon.client.status()).pid
    const threads = () => Number(/^Threads:\s+(\d+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1])
    const descriptors = () => readdirSync(`/proc/${pid}/fd`).length
    const before = { threads: threads(), descriptors: descriptors() }
    const program = [
      'import socket',
      'held = []',
      'for i in range(40):',
      '    s = socket.create_connection(("127.0.0.1", 1023))',
      `    s.sendall(b"CONNECT sink.test:${sinkPort} HTTP/1.1\\r\\nHost: sink.test:${sinkPort}\\r\\n\\r\\n")`,
      '    assert s.recv(100).startswith(b"HTTP/1.1 200")',
      '    s.sendall(b"HOLD\\n")',
      '    held.append(s)',
      'print("holding", len(held), flush=True)',
    ].join('\n')
    const task = await daemon.client.start({
      command: `exec python3 -u -c ${q(program)}`,
      shell: true,
      cwd: workspace(),
      owner: 'relayer',
      network: 'allow',
      timeoutMs: 60_000,
    })
    const ended = await daemon.client.wait(task.id, { timeoutMs: 30_000 })
    expect(await output(task.id)).toBe('holding 40\n')
    expect(ended.state).toBe('exited')
    await waitFor('the relay threads to end', () => threads() <= before.threads + 2, 15_000)
    await waitFor('their descriptors to close', () => descriptors() <= before.descriptors + 8, 15_000)
  })
})
