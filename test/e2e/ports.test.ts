import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { join } from 'node:path'
import type { Task } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

const base = mkdtempSync('/var/tmp/tend-ports-')
// A root daemon's sandboxed tasks run on uids of their own, which must reach their cwd.
chmodSync(base, 0o711)
const q = (text: string) => `'${text.replaceAll("'", "'\\''")}'`

/** A python server: TCP on 127.0.0.1:port (0: the kernel's pick) and UDP on ::1, printing both ports, then waiting. */
function serverLine(port: number): string {
  const program = [
    'import socket, time',
    `t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(("127.0.0.1", ${port})); t.listen()`,
    'u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); u.bind(("::1", 0))',
    'print("ports", t.getsockname()[1], u.getsockname()[1], flush=True)',
    'time.sleep(600)',
  ].join('\n')
  return `exec python3 -u -c ${q(program)}`
}

async function printedPorts(daemon: TestDaemon, id: string): Promise<{ tcp: number; udp: number }> {
  const line = await waitFor(
    `task ${id} to print its ports`,
    async () => {
      const current = await daemon.client.get(id)
      const output = (await daemon.client.read(id)).data
      if (current.state !== 'running' && current.state !== 'queued') throw new Error(`task ${id} ended: ${current.reason ?? current.exitCode} ${output}`)
      return /ports (\d+) (\d+)\n/.exec(output)
    },
    20_000,
  )
  return { tcp: Number(line[1]), udp: Number(line[2]) }
}

async function portsSeen(daemon: TestDaemon, id: string, count: number): Promise<Task> {
  return waitFor(`task ${id}'s record to list ${count} ports`, async () => {
    const task = await daemon.client.get(id)
    return task.ports?.length === count ? task : null
  })
}

afterAll(() => {
  rmSync(base, { recursive: true, force: true })
})

describe("a running task's ports", () => {
  let daemon: TestDaemon
  let cwd: string
  let outsider: Server
  let outsiderPort: number

  beforeAll(async () => {
    daemon = await startTestDaemon()
    cwd = mkdtempSync(join(base, 'ws-'))
    chmodSync(cwd, 0o777)
    outsider = createServer()
    await new Promise<void>((resolve) => outsider.listen(0, '127.0.0.1', resolve))
    outsiderPort = (outsider.address() as { port: number }).port
  })
  afterAll(async () => {
    await daemon?.stop()
    await new Promise((resolve) => outsider?.close(resolve))
  })

  test('a server without a sandbox: its TCP and UDP sockets are in its record while it runs, and gone at its end', async () => {
    const started = await daemon.client.start({ command: serverLine(0), shell: true, cwd, sandbox: 'off' })
    const { tcp, udp } = await printedPorts(daemon, started.id)
    const seen = await portsSeen(daemon, started.id, 2)
    expect(seen.ports).toEqual(
      expect.arrayContaining([
        { proto: 'tcp', address: '127.0.0.1', port: tcp },
        { proto: 'udp', address: '::1', port: udp },
      ]),
    )
    // The list serves them too; the test's own listener is nobody's.
    const listed = (await daemon.client.list()).find((task) => task.id === started.id)!
    expect(listed.ports).toEqual(seen.ports)
    expect(listed.ports!.map((port) => port.port)).not.toContain(outsiderPort)
    const ended = await daemon.client.kill(started.id)
    expect(ended.ports).toEqual([])
    expect((await daemon.client.get(started.id)).ports).toEqual([])
  })

  test("a sandboxed server in its owner's private network: its ports are read from that namespace's tables", async () => {
    const started = await daemon.client.start({ command: serverLine(8300), shell: true, cwd, sandbox: 'workspace', owner: 'ports-agent' })
    expect(started.network).toBe('loopback')
    const { udp } = await printedPorts(daemon, started.id)
    const seen = await portsSeen(daemon, started.id, 2)
    expect(seen.ports).toEqual(
      [
        { proto: 'udp', address: '::1', port: udp },
        { proto: 'tcp', address: '127.0.0.1', port: 8300 },
      ].sort((a, b) => a.port - b.port),
    )
    const ended = await daemon.client.kill(started.id)
    expect(ended.ports).toEqual([])
  })

  test('a task bound to thousands of sockets: status answers while its ports are looked at, and its record lists the lowest 64 with a count of the rest', async () => {
    const program = [
      'import socket, time',
      's = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(3000)]',
      'for u in s: u.bind(("127.0.0.1", 0))',
      'print("bound", flush=True)',
      'time.sleep(600)',
    ].join('\n')
    const started = await daemon.client.start({ command: `exec python3 -u -c ${q(program)}`, shell: true, cwd, sandbox: 'off' })
    // Its output only: a GET would look at its ports before the one below.
    await waitFor('the task to bind its sockets', async () => (await daemon.client.read(started.id)).data.includes('bound\n'), 20_000)
    let looked = false
    const look = daemon.client.get(started.id).finally(() => (looked = true))
    let statuses = 0
    while (!looked) {
      await daemon.client.status()
      if (!looked) statuses++
    }
    const seen = await look
    // A look that held the event loop would have let none (or one) answer meanwhile.
    expect(statuses).toBeGreaterThan(2)
    expect(seen.ports).toHaveLength(64)
    expect(seen.portsOmitted).toBe(3000 - 64)
    const numbers = seen.ports!.map((port) => port.port)
    expect(numbers).toEqual([...numbers].sort((a, b) => a - b))
    const ended = await daemon.client.kill(started.id)
    expect(ended.ports).toEqual([])
    expect(ended.portsOmitted).toBeUndefined()
  }, 60_000)

  test('a task that listens on nothing lists no ports', async () => {
    const started = await daemon.client.start({ command: ['sleep', '30'], cwd, sandbox: 'off' })
    await waitFor('the task to run', async () => (await daemon.client.get(started.id)).state === 'running')
    const ports = await waitFor('its ports to be looked at', async () => (await daemon.client.get(started.id)).ports ?? null)
    expect(ports).toEqual([])
    await daemon.client.kill(started.id)
  })

  test('tend show lists its ports, tend ps has a PORTS column, and tend run --port warns on stderr about a port its owner serves', async () => {
    const started = await daemon.client.start({ command: serverLine(0), shell: true, cwd, sandbox: 'off', name: 'cli server' })
    const { tcp, udp } = await printedPorts(daemon, started.id)
    await portsSeen(daemon, started.id, 2)
    const show = await runCli(['show', started.id], daemon.env)
    expect(show.stdout).toMatch(
      new RegExp(`^ports: +127\\.0\\.0\\.1:${tcp}, \\[::1\\]:${udp}/udp$|^ports: +\\[::1\\]:${udp}/udp, 127\\.0\\.0\\.1:${tcp}$`, 'm'),
    )
    const ps = await runCli(['ps'], daemon.env)
    const [header, ...rows] = ps.stdout.trim().split('\n')
    expect(header!.split(/\s+/)).toEqual(['ID', 'STATE', 'EXIT', 'AGE', 'CPU', 'MEM', 'OUTPUT', 'PORTS', 'OWNER', 'COMMAND'])
    expect(rows.find((row) => row.startsWith(started.id))).toContain(`127.0.0.1:${tcp}`)
    const run = await runCli(['run', '--sandbox', 'off', '--port', String(tcp), '--', 'true'], daemon.env)
    expect(run.exitCode).toBe(0)
    expect(run.stderr).toMatch(new RegExp(`^tend: warning: port ${tcp} is already served by task ${started.id} \\(cli server\\), started \\d+ s ago$`, 'm'))
    const json = await runCli(['run', '--json', '--sandbox', 'off', '--port', 'auto', '--', 'true'], daemon.env)
    expect(JSON.parse(json.stdout)).toMatchObject({ port: expect.any(Number), envKeys: ['PORT'] })
    const bad = await runCli(['run', '--port', '70000', '--', 'true'], daemon.env)
    expect(bad.exitCode).not.toBe(0)
    expect(bad.stderr).toContain('expected auto or a port from 1 to 65535, got "70000"')
    await daemon.client.kill(started.id)
  })
})
