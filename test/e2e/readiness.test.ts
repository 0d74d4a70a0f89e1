import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import type { Task, TaskEvent } from '../../client/index.js'
import { freePort } from '../helpers/ports.js'
import { createTempHome, killEverythingOf, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * A task's readiness condition (`ready`): a Python HTTP server made ready by a line of its output,
 * by the port it listens on and by its URL, with the host's network and inside its owner's private
 * one; a pattern that never comes; a task that ends first; a daemon restart while it waits.
 */

const q = (text: string) => `'${text.replaceAll("'", "'\\''")}'`

/** `python3 -m http.server` on 127.0.0.1:port, after `delay` seconds, saying so on a line of its own. */
function serverLine(port: number, delay = 0): string {
  return `sleep ${delay}; echo "starting on ${port}"; exec python3 -u -m http.server --bind 127.0.0.1 ${port}`
}

function expectReady(task: Task, by: 'pattern' | 'port' | 'url'): void {
  expect(task.state).toBe('running')
  expect(task.ready).toMatchObject({ by })
  expect(Date.parse((task.ready as { at: string }).at)).not.toBeNaN()
}

describe('readiness', () => {
  let daemon: TestDaemon
  const started: string[] = []
  beforeAll(async () => {
    daemon = await startTestDaemon()
  })
  afterEach(async () => {
    for (const id of started.splice(0)) await daemon.client.kill(id).catch(() => undefined)
  })
  afterAll(async () => {
    await daemon?.stop()
  })

  async function start(options: Parameters<TestDaemon['client']['start']>[0]): Promise<Task> {
    const task = await daemon.client.start(options)
    started.push(task.id)
    return task
  }

  test('a server is ready by a line of its output, and the matching line is kept', async () => {
    const port = await freePort()
    const task = await start({ command: serverLine(port, 0.3), ready: { pattern: 'Serving HTTP on .* port \\d+' } })
    expect(task.readyWhen).toEqual({ pattern: 'Serving HTTP on .* port \\d+', timeoutMs: 60_000 })
    expect(task.ready).toBeNull()
    const ready = await daemon.client.waitReady(task.id, { timeoutMs: 30_000 })
    expectReady(ready, 'pattern')
    expect((ready.ready as { line: string }).line).toMatch(new RegExp(`^Serving HTTP on 127\\.0\\.0\\.1 port ${port}`))
    // Ready is not a state, and the record on disk says the same.
    expect(await daemon.client.get(task.id)).toMatchObject({ state: 'running', ready: ready.ready })
  })

  test('a server is ready once something listens on its port', async () => {
    const port = await freePort()
    const task = await start({ command: serverLine(port, 0.3), ready: { port } })
    const ready = await daemon.client.waitReady(task.id, { timeoutMs: 30_000 })
    expectReady(ready, 'port')
    // Listening by then: a connection is taken.
    expect((await daemon.client.read(task.id)).data).toContain(`starting on ${port}`)
  })

  test('a server is ready once its URL answers, and task.ready is sent once', async () => {
    const port = await freePort()
    const events: TaskEvent[] = []
    const abort = new AbortController()
    const streaming = daemon.newClient()
    const listening = (async () => {
      for await (const event of streaming.events({ signal: abort.signal })) events.push(event)
    })().catch(() => undefined)
    const task = await start({ command: serverLine(port, 0.3), ready: { url: `http://127.0.0.1:${port}/` } })
    const ready = await daemon.client.waitReady(task.id, { timeoutMs: 30_000 })
    expectReady(ready, 'url')
    await waitFor('the task.ready event', () => events.some((event) => event.type === 'task.ready' && event.taskId === task.id))
    await daemon.client.kill(task.id)
    await waitFor('the ending event', () => events.some((event) => event.taskId === task.id && event.type === 'task.killed'))
    expect(events.filter((event) => event.type === 'task.ready' && event.taskId === task.id)).toHaveLength(1)
    abort.abort()
    streaming.close()
    await listening
  })

  test('a pattern that never comes times out: the task runs on, its readiness failed', async () => {
    const task = await start({ command: 'echo nothing to see; exec sleep 60', shell: true, ready: { pattern: 'never said', timeoutMs: 300 } })
    const settled = await daemon.client.waitReady(task.id, { timeoutMs: 30_000 })
    expect(settled).toMatchObject({ state: 'running', ready: { failed: 'timed out' } })
  })

  test('a task that ends before it is ready is recorded so, in the record that ends it', async () => {
    const task = await start({ command: 'echo almost; exit 3', shell: true, ready: { pattern: 'ready now' } })
    const settled = await daemon.client.waitReady(task.id, { timeoutMs: 30_000 })
    expect(settled).toMatchObject({ state: 'exited', exitCode: 3, ready: { failed: 'ended first' } })
    expect(await daemon.client.wait(task.id)).toMatchObject({ ready: { failed: 'ended first' } })
  })

  test('a task without a condition has no readiness, and waiting for it is refused', async () => {
    const plain = await start({ command: ['true'] })
    expect(plain.ready).toBeUndefined()
    await expect(daemon.client.waitReady(plain.id, { timeoutMs: 1000 })).rejects.toMatchObject({ code: 'TEND_ERR_VALIDATION' })
  })

  test('a condition is exactly one of pattern, port and url, and a pattern RE2 cannot take is refused', async () => {
    await expect(daemon.client.start({ command: ['true'], ready: {} })).rejects.toMatchObject({
      code: 'TEND_ERR_VALIDATION',
      message: expect.stringMatching(/ready: exactly one/),
    })
    await expect(daemon.client.start({ command: ['true'], ready: { port: 80, pattern: 'x' } })).rejects.toMatchObject({
      code: 'TEND_ERR_VALIDATION',
      message: expect.stringMatching(/pattern and port/),
    })
    await expect(daemon.client.start({ command: ['true'], ready: { pattern: '(a)\\1' } })).rejects.toMatchObject({
      code: 'TEND_ERR_VALIDATION',
      message: expect.stringMatching(/ready\.pattern/),
    })
  })
})

describe('readiness in the private network of a sandboxed task', () => {
  let daemon: TestDaemon
  let base: string
  beforeAll(async () => {
    daemon = await startTestDaemon()
    base = mkdtempSync('/var/tmp/tend-ready-')
    // A root daemon's tasks run on uids of their own, which must reach their cwd.
    chmodSync(base, 0o711)
  })
  afterAll(async () => {
    await daemon?.stop()
    rmSync(base, { recursive: true, force: true })
  })

  test.each(['pattern', 'port', 'url'] as const)('a server inside its owner loopback is ready by its %s, which the host does not see', async (kind) => {
    // The same port on the host stays free: only the task's network is looked at.
    const port = await freePort()
    const ready = kind === 'pattern' ? { pattern: `^Serving HTTP on .* port ${port}` } : kind === 'port' ? { port } : { url: `http://localhost:${port}/` }
    const task = await daemon.client.start({ command: serverLine(port), shell: true, cwd: base, sandbox: 'workspace', ready })
    try {
      expect(task).toMatchObject({ sandbox: 'workspace', network: 'loopback' })
      const settled = await daemon.client.waitReady(task.id, { timeoutMs: 30_000 })
      if (settled.state !== 'running') throw new Error(`the server ended: ${JSON.stringify(settled)} ${(await daemon.client.read(task.id)).data}`)
      expectReady(settled, kind)
      // Nothing of it on the host's loopback.
      await expect(freePortIs(port)).resolves.toBe(true)
    } finally {
      await daemon.client.kill(task.id)
    }
  })

  test('a listener in the private network that never accepts times the readiness out: each try gives up on its own', async () => {
    const port = await freePort()
    // Its backlog fills at once: later connections are never completed (the holder does not wait for them).
    const program = `import socket, time\ns = socket.socket()\ns.bind(("127.0.0.1", ${port}))\ns.listen(0)\nprint("listening", flush=True)\ntime.sleep(60)`
    const task = await daemon.client.start({
      command: `exec python3 -c ${q(program)}`,
      shell: true,
      cwd: base,
      sandbox: 'workspace',
      ready: { url: `http://127.0.0.1:${port}/`, timeoutMs: 3000 },
    })
    try {
      const waiting = daemon.client.waitReady(task.id, { timeoutMs: 30_000 })
      await waitFor('the listener to be there', async () => (await daemon.client.read(task.id)).data.includes('listening'), 20_000)
      // The daemon goes on answering while tries wait for connections that never complete.
      expect((await daemon.client.get(task.id)).state).toBe('running')
      expect(await waiting).toMatchObject({ state: 'running', ready: { failed: 'timed out' } })
    } finally {
      await daemon.client.kill(task.id)
    }
  })
})

/** Whether the host's 127.0.0.1:port can be listened on (nothing there). */
async function freePortIs(port: number): Promise<boolean> {
  const server = createServer()
  const ok = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => resolve(true))
  })
  if (ok) await new Promise<void>((resolve) => server.close(() => resolve()))
  return ok
}

describe('readiness across a restart', () => {
  /** A first daemon on a fresh home, the second started by `restart` once it is gone; both stopped and the home removed after. */
  async function acrossRestart(body: (first: TestDaemon, restart: () => Promise<TestDaemon>) => Promise<void>): Promise<void> {
    const home = createTempHome()
    const first = await startTestDaemon({ home })
    let second: TestDaemon | undefined
    try {
      await body(first, async () => (second = await startTestDaemon({ home })))
    } finally {
      if (second) await second.stop()
      else await killEverythingOf(home)
      rmSync(home, { recursive: true, force: true })
    }
  }

  test.each(['crashes', 'stops with keepTasks'] as const)('a task still waiting when its daemon %s is watched by the next one', (leaving) =>
    acrossRestart(async (first, restart) => {
      const task = await first.client.start({ command: `sleep 1; echo ${q('up and running')}; exec sleep 60`, shell: true, ready: { pattern: '^up and' } })
      await waitFor('the task to run', async () => (await first.client.get(task.id)).state === 'running')
      // It has not said it yet when the first daemon leaves.
      if (leaving === 'crashes') await first.crash()
      else {
        await first.client.stopDaemon({ keepTasks: true })
        await waitFor('the first daemon to exit', () => first.process.exitCode !== null)
      }
      const second = await restart()
      const settled = await second.client.waitReady(task.id, { timeoutMs: 30_000 })
      expect(settled).toMatchObject({ state: 'running', ready: { by: 'pattern', line: 'up and running' } })
      await second.client.kill(task.id)
    }),
  )

  test('a deadline that passed while no daemon ran is counted from its start: the next daemon records it timed out', () =>
    acrossRestart(async (first, restart) => {
      const task = await first.client.start({ command: ['sleep', '60'], ready: { pattern: 'never', timeoutMs: 1500 } })
      const running = await waitFor('the task to run', async () => {
        const current = await first.client.get(task.id)
        return current.state === 'running' ? current : undefined
      })
      await first.crash()
      const deadline = Date.parse(running.startedAt!) + 1500
      await waitFor('its deadline to pass', () => Date.now() > deadline)
      const second = await restart()
      const settled = await second.client.waitReady(task.id, { timeoutMs: 30_000 })
      expect(settled).toMatchObject({ state: 'running', ready: { failed: 'timed out' } })
      await second.client.kill(task.id)
    }))
})
