import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server, type Socket } from 'node:net'
import { join } from 'node:path'
import type { StartOptions, Task } from '../../client/index.js'
import { createTempHome, killEverythingOf, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * `loopback`, the default network of a sandboxed task: each owner's tasks share one private
 * namespace with only `lo`. A server one task starts, the owner's next task reaches at
 * 127.0.0.1:PORT; another owner, the host, and another daemon do not, and the tasks do not reach
 * the host's loopback. `host` (--net) still reaches it.
 */

const base = mkdtempSync('/var/tmp/tend-loopback-')
// A root daemon's tasks run on uids of their own, which must reach their cwd.
chmodSync(base, 0o711)
const q = (text: string) => `'${text.replaceAll("'", "'\\''")}'`

/** A one-line HTTP server on 127.0.0.1:port that answers `name`, as a shell line (python, unbuffered). */
function serverLine(port: number, name: string): string {
  const program = [
    'import http.server',
    'class H(http.server.BaseHTTPRequestHandler):',
    '  def do_GET(self):',
    `    body = b"${name}"`,
    '    self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)',
    '  def log_message(self, *args): pass',
    `s = http.server.HTTPServer(("127.0.0.1", ${port}), H)`,
    `print("listening ${port}", flush=True)`,
    's.serve_forever()',
  ].join('\n')
  return `exec python3 -u -c ${q(program)}`
}

/** Starts a server task and waits until it listens (its own line says so). */
async function startServer(daemon: TestDaemon, options: { port: number; name: string; owner?: string; cwd: string }): Promise<Task> {
  const task = await daemon.client.start({
    command: serverLine(options.port, options.name),
    shell: true,
    cwd: options.cwd,
    sandbox: 'workspace',
    ...(options.owner ? { owner: options.owner } : {}),
  })
  // Sandboxed, on the default network: never the host's.
  expect(task).toMatchObject({ sandbox: 'workspace', network: 'loopback' })
  await waitFor(
    `the server task ${task.id} to listen on ${options.port}`,
    async () => {
      const current = await daemon.client.get(task.id)
      if (current.state !== 'running' && current.state !== 'queued')
        throw new Error(`the server task ended: ${JSON.stringify(current)} ${(await daemon.client.read(task.id)).data}`)
      return (await daemon.client.read(task.id)).data.includes(`listening ${options.port}`)
    },
    20_000,
  )
  return task
}

/** Runs a shell line as a task to its end: its record and output. */
async function run(daemon: TestDaemon, line: string, options: Partial<StartOptions> & { cwd: string }): Promise<{ task: Task; output: string }> {
  const started = await daemon.client.start({ command: line, shell: true, timeoutMs: 20_000, sandbox: 'workspace', ...options })
  expect(started.network).toBe(options.network ?? 'loopback')
  const task = await daemon.client.wait(started.id, { timeoutMs: 30_000 })
  return { task, output: (await daemon.client.read(started.id)).data }
}

const fetchLine = (port: number) => `curl -sS --max-time 5 http://127.0.0.1:${port}/; echo " rc=$?"`

afterAll(() => {
  rmSync(base, { recursive: true, force: true })
})

describe('a root daemon', () => {
  let daemon: TestDaemon
  let cwd: string
  let hostServer: Server
  let hostPort: number
  let hostConnections = 0
  const hostSockets = new Set<Socket>()

  beforeAll(async () => {
    daemon = await startTestDaemon({ env: { TEND_SANDBOX: 'workspace' } })
    cwd = mkdtempSync(join(base, 'ws-'))
    chmodSync(cwd, 0o777)
    hostServer = createServer((socket: Socket) => {
      hostConnections += 1
      hostSockets.add(socket.on('close', () => hostSockets.delete(socket)))
      socket.end('HTTP/1.0 200 OK\r\nContent-Length: 4\r\n\r\nhost')
    })
    await new Promise<void>((resolve) => hostServer.listen(0, '127.0.0.1', resolve))
    hostPort = (hostServer.address() as { port: number }).port
  })
  afterAll(async () => {
    await daemon?.stop()
    // curl may leave its connection half open: the server closes only once none is left.
    for (const socket of hostSockets) socket.destroy()
    await new Promise((resolve) => hostServer?.close(resolve))
  })

  test('status says which network modes it can enforce, and loopback is the default', async () => {
    const status = await daemon.client.status()
    expect(status.sandbox.network.default).toBe('loopback')
    expect(status.sandbox.network.modes).toEqual(expect.arrayContaining(['loopback', 'host']))
  })

  test("a task reaches the server its owner's earlier task started, at 127.0.0.1:PORT; the record says loopback", async () => {
    const server = await startServer(daemon, { port: 8125, name: 'mine', cwd })
    expect(server.network).toBe('loopback')
    const { task, output } = await run(daemon, fetchLine(8125), { cwd })
    expect(task.network).toBe('loopback')
    expect(output).toBe('mine rc=0\n')
    await daemon.client.kill(server.id)
  })

  test('two owners with a server on the same port each reach only their own; the host reaches neither', async () => {
    const [a, b] = await Promise.all([
      startServer(daemon, { port: 8200, name: 'owner-a', owner: 'agent-a', cwd }),
      startServer(daemon, { port: 8200, name: 'owner-b', owner: 'agent-b', cwd }),
    ])
    const [fromA, fromB, fromThird] = await Promise.all([
      run(daemon, fetchLine(8200), { cwd, owner: 'agent-a' }),
      run(daemon, fetchLine(8200), { cwd, owner: 'agent-b' }),
      run(daemon, fetchLine(8200), { cwd, owner: 'agent-c' }),
    ])
    expect(fromA.output).toBe('owner-a rc=0\n')
    expect(fromB.output).toBe('owner-b rc=0\n')
    expect(fromThird.output).toMatch(/rc=7\n$/)
    const host = await fetch(`http://127.0.0.1:8200/`).then(
      (response) => `answered ${response.status}`,
      (error: Error) => `refused (${(error.cause as Error | undefined)?.message ?? error.message})`,
    )
    expect(host).toMatch(/^refused/)
    await Promise.all([daemon.client.kill(a.id), daemon.client.kill(b.id)])
  })

  test("a loopback task does not reach a server on the host's 127.0.0.1; a host task (--net) does", async () => {
    const before = hostConnections
    const loopback = await run(daemon, fetchLine(hostPort), { cwd })
    expect(loopback.output).toMatch(/rc=7\n$/)
    expect(hostConnections).toBe(before)
    const host = await run(daemon, fetchLine(hostPort), { cwd, network: 'host' })
    expect(host.task.network).toBe('host')
    expect(host.output).toBe('host rc=0\n')
    expect(hostConnections).toBe(before + 1)
  })

  test('a loopback task cannot change its namespace: no address, no route, no interface can be added', async () => {
    const { output } = await run(daemon, 'ip link add dummy0 type dummy 2>&1; echo "link rc=$?"; ip addr add 10.9.9.9/24 dev lo 2>&1; echo "addr rc=$?"', {
      cwd,
    })
    expect(output).toMatch(/link rc=[1-9]/)
    expect(output).toMatch(/addr rc=[1-9]/)
  })
})

describe('after a daemon restart', () => {
  test("the owner's next task joins the namespace its running server is in", async () => {
    const home = createTempHome()
    const cwd = mkdtempSync(join(base, 'restart-'))
    chmodSync(cwd, 0o777)
    let daemon = await startTestDaemon({ home, env: { TEND_SANDBOX: 'workspace' } })
    try {
      const server = await startServer(daemon, { port: 8300, name: 'before', cwd })
      await daemon.crash()
      daemon = await startTestDaemon({ home, env: { TEND_SANDBOX: 'workspace' } })
      expect((await daemon.client.get(server.id)).state).toBe('running')
      const { output } = await run(daemon, fetchLine(8300), { cwd })
      expect(output).toBe('before rc=0\n')
      await daemon.client.kill(server.id)
    } finally {
      await daemon.stop()
      await killEverythingOf(home)
      rmSync(home, { recursive: true, force: true })
    }
  })
})

describe('an unprivileged daemon (user namespaces)', () => {
  let daemon: TestDaemon
  let cwd: string

  beforeAll(async () => {
    daemon = await startTestDaemon({ user: 'unprivileged', env: { TEND_SANDBOX: 'workspace' } })
    cwd = mkdtempSync(join(base, 'unprivileged-'))
    chownSync(cwd, daemon.uid, daemon.gid)
  })
  afterAll(async () => {
    await daemon?.stop()
  })

  test("its owners get private loopbacks too: a task reaches its owner's server, another owner does not", async () => {
    const status = await daemon.client.status()
    expect(status.sandbox.network.modes, JSON.stringify(status.sandbox.network.missing)).toContain('loopback')
    const server = await startServer(daemon, { port: 8400, name: 'unprivileged', cwd })
    const [mine, other] = await Promise.all([run(daemon, fetchLine(8400), { cwd }), run(daemon, fetchLine(8400), { cwd, owner: 'someone-else' })])
    expect(mine.output).toBe('unprivileged rc=0\n')
    expect(other.output).toMatch(/rc=7\n$/)
    await daemon.client.kill(server.id)
  })
})

describe('the node fallback spawner', () => {
  test.each(['root', 'unprivileged'] as const)("puts loopback tasks in their owner's namespace as well (daemon as %s)", async (who) => {
    const daemon = await startTestDaemon({
      env: { TEND_SPAWNER: 'node', TEND_SANDBOX: 'workspace' },
      ...(who === 'unprivileged' ? { user: 'unprivileged' as const } : {}),
    })
    const cwd = mkdtempSync(join(base, 'node-'))
    chmodSync(cwd, 0o777)
    chownSync(cwd, daemon.uid, daemon.gid)
    try {
      const server = await startServer(daemon, { port: 8500, name: 'node-spawned', cwd })
      const { output } = await run(daemon, fetchLine(8500), { cwd })
      expect(output).toBe('node-spawned rc=0\n')
      await daemon.client.kill(server.id)
    } finally {
      await daemon.stop()
    }
  })
})
