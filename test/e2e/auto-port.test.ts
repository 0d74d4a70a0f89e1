import { afterEach, describe, expect, test } from 'vitest'
import { rmSync } from 'node:fs'
import { TendClient } from '../../client/index.js'
import { AUTO_PORT_RANGE } from '../../protocol/index.js'
import { createTempHome, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

async function daemonFor(options: { home?: string; env?: Record<string, string> } = {}): Promise<TestDaemon> {
  const daemon = await startTestDaemon({ ...options, env: { TEND_SANDBOX: 'off', ...options.env } })
  cleanups.push(() => daemon.stop())
  return daemon
}

async function printedPort(daemon: TestDaemon, id: string): Promise<number> {
  const match = await waitFor(`task ${id} to print its PORT`, async () => /PORT=(\d+)\n/.exec((await daemon.client.read(id)).data), 20_000)
  return Number(match[1])
}

function asOwner(daemon: TestDaemon, owner: string): TendClient {
  const client = new TendClient({ home: daemon.home, autoStart: false, owner })
  cleanups.push(() => client.close())
  return client
}

const inRange = (port: number) => port >= AUTO_PORT_RANGE.first && port <= AUTO_PORT_RANGE.last

describe('--port auto', () => {
  test('50 tasks started at once each get their own free port, as PORT and in their record', async () => {
    const daemon = await daemonFor({ env: { TEND_CONCURRENCY: '64', TEND_PER_OWNER_CONCURRENCY: '64' } })
    const started = await Promise.all(
      Array.from({ length: 50 }, () => daemon.client.start({ command: 'echo "PORT=$PORT"; exec sleep 60', shell: true, port: 'auto' })),
    )
    const ports = started.map((task) => task.port!)
    expect(ports.every(inRange)).toBe(true)
    expect(new Set(ports).size).toBe(50)
    for (const task of started) expect(task.envKeys).toContain('PORT')
    const printed = await Promise.all(started.map((task) => printedPort(daemon, task.id)))
    expect(printed).toEqual(ports)
    await Promise.all(started.map((task) => daemon.client.kill(task.id)))
  }, 60_000)

  test('a fixed port is given as PORT and recorded, and is not exclusive', async () => {
    const daemon = await daemonFor()
    const [a, b] = await Promise.all([0, 1].map(() => daemon.client.start({ command: 'echo "PORT=$PORT"', shell: true, port: 4321, env: { PORT: '1' } })))
    expect([a!.port, b!.port]).toEqual([4321, 4321])
    expect(await printedPort(daemon, a!.id)).toBe(4321)
    expect(await printedPort(daemon, b!.id)).toBe(4321)
  })

  test("a running task's port is held across a daemon restart, and stays in its record once it has ended", async () => {
    const home = createTempHome()
    cleanups.push(() => rmSync(home, { recursive: true, force: true }))
    const first = await startTestDaemon({ home, env: { TEND_SANDBOX: 'off' } })
    cleanups.push(() => first.stop())
    const kept = await first.client.start({ command: ['sleep', '600'], port: 'auto' })
    await waitFor('the task to run', async () => (await first.client.get(kept.id)).state === 'running')
    await first.client.stopDaemon({ keepTasks: true })
    await waitFor('the first daemon to exit', () => first.process.exitCode !== null)
    const second = await startTestDaemon({ home, env: { TEND_SANDBOX: 'off' } })
    cleanups.push(() => second.stop())
    expect(await second.client.get(kept.id)).toMatchObject({ state: 'running', port: kept.port })
    // The new daemon starts its picks where the first did: the port the running task holds is skipped.
    const next = await second.client.start({ command: ['true'], port: 'auto' })
    expect(next.port).not.toBe(kept.port)
    expect(inRange(next.port!)).toBe(true)
    const ended = await second.client.kill(kept.id)
    expect(ended.port).toBe(kept.port)
  })
})

describe('one owner cannot take every auto port', () => {
  test('queued tasks waiting on a long one hold ports up to the owner’s cap; past it a start is refused naming the cap; another owner still gets one', async () => {
    const daemon = await daemonFor({ env: { TEND_PER_OWNER_AUTO_PORTS: '3' } })
    const owner = asOwner(daemon, 'mallory')
    const long = await owner.start({ command: ['sleep', '600'] })
    const waiting: Array<Awaited<ReturnType<TendClient['start']>>> = []
    for (let index = 0; index < 3; index++) waiting.push(await owner.start({ command: ['true'], port: 'auto', after: [long.id] }))
    expect(waiting.every((task) => task.state === 'queued' && inRange(task.port!))).toBe(true)
    const refused = await owner.start({ command: ['true'], port: 'auto', after: [long.id] }).catch((error: unknown) => error)
    expect(refused).toMatchObject({ code: 'TEND_ERR_OWNER_PORTS_USED_UP' })
    expect(String((refused as Error).message)).toContain('3')
    const other = await asOwner(daemon, 'alice').start({ command: ['true'], port: 'auto' })
    expect(inRange(other.port!)).toBe(true)
    await owner.kill(long.id)
    await waitFor('the waiting tasks to end', async () =>
      (await Promise.all(waiting.map((task) => owner.get(task.id)))).every((task) => task.state === 'failed'),
    )
    // Released with their tasks: the owner gets a port again.
    const again = await owner.start({ command: ['true'], port: 'auto' })
    expect(inRange(again.port!)).toBe(true)
  })
})

describe('fixed ports are given, not held', () => {
  test('an owner’s fixed ports inside the auto range neither count towards its cap nor keep auto ports from anyone', async () => {
    const daemon = await daemonFor({ env: { TEND_PER_OWNER_AUTO_PORTS: '2' } })
    const alice = asOwner(daemon, 'alice')
    const gate = await alice.start({ command: ['sleep', '600'] })
    for (let port = AUTO_PORT_RANGE.first; port < AUTO_PORT_RANGE.first + 5; port++) await alice.start({ command: ['true'], port, after: [gate.id] })
    const given = [await alice.start({ command: ['sleep', '600'], port: 'auto' }), await alice.start({ command: ['sleep', '600'], port: 'auto' })]
    expect(given.every((task) => inRange(task.port!))).toBe(true)
    const bobs = await asOwner(daemon, 'bob').start({ command: ['true'], port: 'auto' })
    expect(inRange(bobs.port!)).toBe(true)
    for (const task of [gate, ...given]) await alice.kill(task.id)
  })
})

describe('a start asking for a port another task of its owner listens on', () => {
  test('is answered with a warning naming that task; another owner gets none', async () => {
    const daemon = await daemonFor()
    const server = await daemon.client.start({
      command: `exec python3 -u -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print("PORT=%d" % s.getsockname()[1], flush=True); time.sleep(600)'`,
      shell: true,
      name: 'dev server',
      owner: 'agent-a',
    })
    const port = await printedPort(daemon, server.id)
    const second = await daemon.client.start({ command: ['true'], owner: 'agent-a', port })
    expect(second.warnings).toEqual([
      expect.stringMatching(new RegExp(`^port ${port} is already served by task ${server.id} \\(dev server\\), started \\d+ s ago$`)),
    ])
    expect(second.port).toBe(port)
    const auto = await daemon.client.start({ command: ['true'], owner: 'agent-a', port: 'auto' })
    expect(auto.warnings).toBeUndefined()
    const otherOwner = await daemon.client.start({ command: ['true'], owner: 'agent-b', port })
    expect(otherOwner.warnings).toBeUndefined()
    // Never part of the record.
    expect(await daemon.client.get(second.id)).not.toHaveProperty('warnings')
    await daemon.client.kill(server.id)
  })
})
