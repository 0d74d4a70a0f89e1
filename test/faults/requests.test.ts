import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setImmediate as yieldToLoop } from 'node:timers/promises'
import Fastify, { type FastifyInstance } from 'fastify'
import { TendClient } from '../../client/index.js'
import { streamEvents } from '../../client/events.js'
import { socketEndpoint } from '../../client/endpoint.js'
import { socketAnswers } from '../../client/ensure-daemon.js'
import { TendError, type Task, type WireError } from '../../protocol/index.js'
import { EventLog } from '../../daemon/store/event-log.js'
import { validatorCompiler } from '../../daemon/http/request-validation.js'
import { registerEventsRoute } from '../../daemon/http/routes/events.js'
import { assertNothingLeft, createTempHome, daemonEnv, REPO_ROOT, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { isAlive } from '../helpers/processes.js'
import { rawRequest, type RawAnswer } from '../helpers/raw-http.js'
import { waitFor } from '../helpers/wait-for.js'

const ANSWER_TIMEOUT_MS = 5000

/** One raw request (see rawRequest): bodies, headers and methods can be anything. */
function send(socketPath: string, method: string, path: string, options: { body?: unknown; headers?: Record<string, string> } = {}): Promise<RawAnswer> {
  const body = options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body)
  return rawRequest(socketPath, { method, path, body, headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...options.headers } })
}

const wire = (answer: RawAnswer) => JSON.parse(answer.text) as WireError

describe('requests against a running daemon', () => {
  let daemon: TestDaemon
  let socket: string
  let project: string
  let alice: TendClient
  let bob: TendClient

  beforeAll(async () => {
    daemon = await startTestDaemon()
    socket = join(daemon.home, 'tend.sock')
    // Outside /tmp: a sandboxed task has a private /tmp.
    project = mkdtempSync('/var/tmp/tend-requests-')
    alice = new TendClient({ home: daemon.home, autoStart: false, owner: 'agent-alice' })
    bob = new TendClient({ home: daemon.home, autoStart: false, owner: 'agent-bob' })
  })
  afterAll(async () => {
    alice?.close()
    bob?.close()
    try {
      await daemon?.stop()
    } finally {
      if (project) rmSync(project, { recursive: true, force: true })
    }
  })

  const daemonServes = async () => {
    expect(isAlive(daemon.process.pid!)).toBe(true)
    expect((await send(socket, 'GET', '/v1/status')).status).toBe(200)
  }

  test('a strict task asking for memoryBytes 1e308 or pidsMax 1e9 is refused with a 400 naming the field, and the daemon keeps serving', async () => {
    for (const [field, value] of [
      ['memoryBytes', 1e308],
      ['pidsMax', 1e9],
    ] as const) {
      const answer = await send(socket, 'POST', '/v1/tasks', {
        body: `{"command":["true"],"cwd":${JSON.stringify(project)},"sandbox":"strict","${field}":${value}}`,
      })
      expect(answer.status, answer.text).toBe(400)
      expect(wire(answer)).toMatchObject({ code: 'TEND_ERR_VALIDATION', message: expect.stringContaining(`body/${field}: expected an integer <=`) })
    }
    expect(await daemon.client.list({ all: true })).toEqual([])
    await daemonServes()
  })

  test('a body nested deeper than the stack answers 400, not 500', async () => {
    const deep = '['.repeat(5000) + ']'.repeat(5000)
    for (const path of ['/v1/tasks', '/v1/gc', '/v1/tasks/aaaaaaaaaaaa/kill']) {
      const answer = await send(socket, 'POST', path, { body: deep })
      expect(answer.status, `${path}: ${answer.text}`).toBe(400)
      expect(wire(answer)).toMatchObject({ code: 'TEND_ERR_VALIDATION', message: expect.stringContaining('an array nested too deep to show') })
    }
    await daemonServes()
  })

  const id = 'aaaaaaaaaaaa'
  const start = (extra: string) => ({ path: '/v1/tasks', method: 'POST', body: `{"command":["true"],"cwd":"/var/tmp",${extra}}` })
  const outOfRange: Array<{ field: string; method: string; path: string; body?: string; headers?: Record<string, string> }> = [
    { field: 'body/timeoutMs', ...start('"timeoutMs":31536000001') },
    { field: 'body/timeoutMs', ...start('"timeoutMs":1e308') },
    { field: 'body/timeoutMs', ...start('"timeoutMs":0') },
    { field: 'body/timeoutMs', ...start('"timeoutMs":1.5') },
    { field: 'body/maxOutputBytes', ...start('"maxOutputBytes":17592186044417') },
    { field: 'body/maxOutputBytes', ...start('"maxOutputBytes":0') },
    { field: 'body/memoryBytes', ...start('"sandbox":"strict","memoryBytes":1099511627777') },
    { field: 'body/memoryBytes', ...start('"sandbox":"strict","memoryBytes":1048575') },
    { field: 'body/pidsMax', ...start('"sandbox":"strict","pidsMax":4194305') },
    { field: 'body/pidsMax', ...start('"sandbox":"strict","pidsMax":0') },
    { field: 'body/graceMs', method: 'POST', path: `/v1/tasks/${id}/kill`, body: '{"graceMs":3600001}' },
    { field: 'body/graceMs', method: 'POST', path: `/v1/tasks/${id}/kill`, body: '{"graceMs":-1}' },
    { field: 'body/signal', method: 'POST', path: `/v1/tasks/${id}/kill`, body: '{"signal":65}' },
    { field: 'querystring/from', method: 'GET', path: `/v1/tasks/${id}/output?from=9007199254740993` },
    { field: 'querystring/from', method: 'GET', path: `/v1/tasks/${id}/output?from=Infinity` },
    { field: 'querystring/from', method: 'GET', path: `/v1/tasks/${id}/output?from=-1` },
    { field: 'querystring/tail', method: 'GET', path: `/v1/tasks/${id}/output?tail=1e308` },
    { field: 'querystring/maxBytes', method: 'GET', path: `/v1/tasks/${id}/output?maxBytes=16777217` },
    { field: 'querystring/waitMs', method: 'GET', path: `/v1/tasks/${id}/output?waitMs=60001` },
    { field: 'querystring/timeoutMs', method: 'GET', path: `/v1/tasks/${id}/wait?timeoutMs=60001` },
    { field: 'querystring/timeoutMs', method: 'GET', path: `/v1/tasks/${id}/wait?timeoutMs=Infinity` },
    { field: 'body/olderThanMs', method: 'POST', path: '/v1/gc', body: '{"olderThanMs":1e308}' },
    { field: 'body/olderThanMs', method: 'POST', path: '/v1/gc', body: '{"olderThanMs":-1}' },
    { field: 'querystring/since', method: 'GET', path: '/v1/events?since=Infinity' },
    { field: 'querystring/since', method: 'GET', path: '/v1/events?since=9007199254740993' },
    { field: 'headers/last-event-id', method: 'GET', path: '/v1/events', headers: { 'last-event-id': '1e308' } },
    { field: 'headers/last-event-id', method: 'GET', path: '/v1/events', headers: { 'last-event-id': 'yesterday' } },
  ]

  test.each(outOfRange)('$method $path $body $headers answers 400 naming $field', async ({ field, method, path, body, headers }) => {
    const answer = await send(socket, method, path, { body, headers })
    expect(answer.status, answer.text).toBe(400)
    expect(wire(answer)).toMatchObject({ code: 'TEND_ERR_VALIDATION', message: expect.stringContaining(`${field}:`) })
  })

  test('the largest memoryBytes and pidsMax accepted reach the cgroups and the strict task runs', async (context) => {
    const { sandbox } = await daemon.client.status()
    expect(sandbox.profiles, `strict is not available here: ${sandbox.missing.strict}`).toContain('strict')
    const task = await daemon.client.start({ command: ['true'], cwd: project, sandbox: 'strict', memoryBytes: 2 ** 40, pidsMax: 4_194_304 })
    const ended = await daemon.client.wait(task.id, { timeoutMs: 20_000 })
    expect(ended).toMatchObject({ state: 'exited', exitCode: 0, memoryBytes: 2 ** 40, pidsMax: 4_194_304 })
    await daemonServes()
  })

  test('the longest timeoutMs and the largest maxOutputBytes are accepted', async () => {
    const task = await daemon.client.start({ command: ['true'], cwd: project, timeoutMs: 365 * 24 * 3_600_000, maxOutputBytes: 16 * 2 ** 40 })
    expect(task).toMatchObject({ timeoutMs: 365 * 24 * 3_600_000, maxOutputBytes: 16 * 2 ** 40 })
    await daemon.client.wait(task.id)
    await daemonServes()
  })

  test('/v1/events answers a malformed owner header with a 400 in JSON, and HEAD /v1/events answers', async () => {
    for (const owner of ['bad owner!', '', '-starts-with-a-dash', 'x'.repeat(200)]) {
      const answer = await send(socket, 'GET', '/v1/events', { headers: { 'x-tend-owner': owner } })
      expect(answer.status, answer.text).toBe(400)
      expect(answer.headers['content-type']).toMatch(/^application\/json/)
      expect(wire(answer)).toMatchObject({ code: 'TEND_ERR_VALIDATION', message: expect.stringContaining('headers/x-tend-owner') })
    }
    const head = await send(socket, 'HEAD', '/v1/events')
    expect(head.status).toBe(200)
    expect(head.headers['content-type']).toMatch(/^text\/event-stream/)
    expect(head.headers['x-tend-daemon-id']).toBe((await daemon.client.status()).events.daemonId)
    const badHead = await send(socket, 'HEAD', '/v1/events', { headers: { 'x-tend-owner': 'bad owner!' } })
    expect(badHead.status).toBe(400)
    await daemonServes()
  })

  test("an owner's status counts only its own tasks; the operator's counts every task", async () => {
    const task = await alice.start({ command: ['sleep', '1000'] })
    await waitFor(`alice's task ${task.id} to run`, async () => (await alice.get(task.id)).state === 'running')
    expect((await alice.status()).tasks).toEqual({ queued: 0, running: 1, finished: 0 })
    expect((await bob.status()).tasks).toEqual({ queued: 0, running: 0, finished: 0 })
    expect((await daemon.client.status()).tasks.running).toBe(1)
    await daemon.client.kill(task.id)
    expect((await bob.status()).tasks.finished).toBe(0)
    expect((await alice.status()).tasks.finished).toBe(1)
  })

  test("an owner's gc removes only its own finished tasks", async () => {
    const alices = await alice.start({ command: ['true'] })
    const bobs = await bob.start({ command: ['true'] })
    await alice.wait(alices.id)
    await bob.wait(bobs.id)
    const collected = await bob.gc({ olderThanMs: 0 })
    expect(collected.removed).toContain(bobs.id)
    expect(collected.removed).not.toContain(alices.id)
    expect((await alice.get(alices.id)).state).toBe('exited')
  })

  // Last: on a daemon that lets an owner stop it, every later request would fail.
  test("an owner's POST /v1/stop is refused with 403 TEND_ERR_OPERATOR_ONLY and the daemon keeps running", async () => {
    const answer = await send(socket, 'POST', '/v1/stop', { headers: { 'x-tend-owner': 'agent-alice' } })
    expect(answer.status, answer.text).toBe(403)
    expect(wire(answer)).toMatchObject({
      code: 'TEND_ERR_OPERATOR_ONLY',
      message: 'operator only: stopping the daemon cannot be done for an owner (request made for owner agent-alice)',
    })
    const malformed = await send(socket, 'POST', '/v1/stop', { headers: { 'x-tend-owner': 'bad owner!' } })
    expect(malformed.status, malformed.text).toBe(400)
    await expect(alice.stopDaemon()).rejects.toMatchObject({ code: 'TEND_ERR_OPERATOR_ONLY' })
    await daemonServes()
  })
})

/** A task record for events published by hand. */
function fakeTask(id: string, owner: string, name: string | null = null): Task {
  return { id, owner, name, state: 'queued' } as unknown as Task
}

/** The events route alone on a socket, over an event log the test publishes to. */
async function eventsApp(log: EventLog): Promise<{ app: FastifyInstance; socket: string; folder: string; stop: () => Promise<void> }> {
  const folder = mkdtempSync(join(tmpdir(), 'tend-events-'))
  const socket = join(folder, 'events.sock')
  const closing = new AbortController()
  const app = Fastify()
  app.setValidatorCompiler(validatorCompiler)
  app.setErrorHandler((error, _request, reply) => {
    const tendError = error instanceof TendError ? error : new TendError('TEND_ERR_INTERNAL', { detail: String(error) })
    void reply.status(tendError.statusCode).send(tendError.toWire())
  })
  registerEventsRoute(app, { events: log, closing: closing.signal })
  await app.listen({ path: socket })
  return {
    app,
    socket,
    folder,
    stop: async () => {
      closing.abort()
      await app.close()
      rmSync(folder, { recursive: true, force: true })
    },
  }
}

describe('the event window and slow subscribers', () => {
  test('a subscriber asking for a since older than the kept window, or past the last event, gets 410 TEND_ERR_EVENTS_GAP', async () => {
    const log = new EventLog('windowed', 3)
    for (let index = 1; index <= 5; index += 1) log.publish('task.queued', fakeTask(`task${index}`, 'operator'))
    const server = await eventsApp(log)
    try {
      for (const [path, headers] of [
        ['/v1/events?since=0', undefined],
        ['/v1/events?since=1', undefined],
        ['/v1/events', { 'last-event-id': '0' }],
        ['/v1/events?since=9', undefined],
      ] as const) {
        const answer = await send(server.socket, 'GET', path, { headers })
        expect(answer.status, `${path}: ${answer.text}`).toBe(410)
        expect(wire(answer)).toMatchObject({ code: 'TEND_ERR_EVENTS_GAP' })
        expect(answer.headers['x-tend-daemon-id']).toBe('windowed')
      }
      expect(wire(await send(server.socket, 'GET', '/v1/events?since=1')).message).toBe(
        'events before seq 3 are no longer kept (asked from 1): list the tasks again, then follow from seq 5',
      )
      // The oldest kept event is seq 3: asking from 2 misses nothing.
      expect((await send(server.socket, 'GET', '/v1/events?since=2')).status).toBe(200)
      expect((await send(server.socket, 'GET', '/v1/events?since=5')).status).toBe(200)
    } finally {
      await server.stop()
    }
  })

  test("the client's event follower surfaces the gap as TEND_ERR_EVENTS_GAP", async () => {
    const log = new EventLog('windowed', 2)
    for (let index = 1; index <= 4; index += 1) log.publish('task.queued', fakeTask(`task${index}`, 'operator'))
    const server = await eventsApp(log)
    try {
      const follow = async () => {
        for await (const event of streamEvents(socketEndpoint(server.socket), { since: 0, signal: AbortSignal.timeout(ANSWER_TIMEOUT_MS) })) void event
      }
      await expect(follow()).rejects.toMatchObject({ code: 'TEND_ERR_EVENTS_GAP', message: expect.stringContaining('asked from 0') })
    } finally {
      await server.stop()
    }
  })

  test('a subscriber that does not read holds little of the daemon memory and is dropped with a final comment line once the window passes it', async () => {
    const log = new EventLog('slow', 40)
    const server = await eventsApp(log)
    const bulky = 'x'.repeat(64 * 1024)
    let req: ReturnType<typeof httpRequest> | undefined
    try {
      const response = await new Promise<IncomingMessage>((resolve, reject) => {
        req = httpRequest({ socketPath: server.socket, path: '/v1/events?since=0', agent: false }, (res) => {
          res.pause()
          resolve(res)
        })
        req.on('error', reject)
        req.end()
      })
      let published = 0
      for (let index = 0; index < 200; index += 1) {
        published += log.publish('task.queued', fakeTask(`task${index}`, 'operator', bulky)).task.name!.length
        if (index % 5 === 0) await yieldToLoop()
      }
      let received = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => (received += chunk))
      response.resume()
      await waitFor('the slow subscriber stream to end', () => response.readableEnded || response.destroyed, ANSWER_TIMEOUT_MS)
      expect(received.trimEnd().split('\n').at(-1)).toMatch(/^: dropped: /)
      // 200 events of 64 KiB were published; what was queued for this reader stays near one socket buffer.
      expect(published).toBeGreaterThan(12 * 1024 * 1024)
      expect(received.length).toBeLessThan(4 * 1024 * 1024)
      expect(log.subscriberCount).toBe(0)
    } finally {
      req?.destroy()
      await server.stop()
    }
  })
})

describe('the last-resort handler', () => {
  test('an unhandled rejection or exception in the daemon process is logged and the daemon keeps serving', async () => {
    const home = createTempHome()
    const entry = join(REPO_ROOT, 'dist', 'daemon', 'index.js')
    // Plants the faults on SIGUSR2, once the daemon serves.
    const script = `
      const { runDaemonForeground } = await import(${JSON.stringify(entry)})
      process.on('SIGUSR2', () => {
        void Promise.reject(new Error('planted rejection'))
        setImmediate(() => { throw new Error('planted exception') })
      })
      process.exitCode = await runDaemonForeground(process.env, (line) => process.stderr.write(line + '\\n'))
    `
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { env: daemonEnv(home), stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
    const socket = join(home, 'tend.sock')
    try {
      const logged = () => readFileSync(join(home, 'daemon.log'), 'utf8')
      await waitFor(`the daemon socket ${socket}`, () => socketAnswers(socket), 30_000)
      // Once "daemon started" is logged, the handler logs to daemon.log (before, while the daemon starts, to stderr).
      await waitFor('"daemon started" in the daemon log', () => logged().includes('"msg":"daemon started"'))
      child.kill('SIGUSR2')
      await waitFor('both planted faults in the daemon log', () => logged().includes('planted rejection') && logged().includes('planted exception')).catch(
        (error: Error) => {
          throw new Error(
            `${error.message}; the daemon ${child.exitCode === null ? 'runs' : `exited with ${child.exitCode}`}; its stderr: ${stderr}; its log: ${logged().slice(-2000)}`,
          )
        },
      )
      expect(child.exitCode).toBeNull()
      expect((await send(socket, 'GET', '/v1/status')).status).toBe(200)
      child.kill('SIGTERM')
      expect(await exited).toBe(0)
      await assertNothingLeft(home)
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      rmSync(home, { recursive: true, force: true })
    }
  })
})
