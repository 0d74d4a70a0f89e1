import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { join } from 'node:path'
import { TendClient, TendError, isTendError } from '../../client/index.js'
import { createTempHome, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

interface RawAnswer {
  status: number
  headers: Record<string, string | string[] | undefined>
  text: string
  json: unknown
}

/**
 * The ways a client reaches the API: the daemon's Unix socket, and the console's TCP listener with
 * its token (the same routes, schemas and errors; every test below runs over both).
 */
interface Transport {
  name: string
  /** Where a raw request goes, and the headers it must carry there. */
  target: () => { socketPath: string } | { host: string; port: number }
  headers: () => Record<string, string>
}
let tcp: { port: number; token: string } | null = null
const TRANSPORTS: Transport[] = [
  { name: 'the Unix socket', target: () => ({ socketPath: socket }), headers: () => ({}) },
  {
    name: "the console's TCP listener, with its token",
    target: () => ({ host: '127.0.0.1', port: tcp!.port }),
    headers: () => ({ authorization: `Bearer ${tcp!.token}` }),
  },
]
let via: Transport

/** One HTTP request over the transport under test, with the path sent exactly as given (no normalizing). */
function rawRequest(method: string, path: string, options: { body?: string; headers?: Record<string, string> } = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...via.headers(), ...options.headers }
    if (options.body !== undefined) {
      headers['content-type'] ??= 'application/json'
      headers['content-length'] = Buffer.byteLength(options.body)
    }
    const req = request({ ...via.target(), method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('error', reject)
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        let json: unknown
        try {
          json = JSON.parse(text)
        } catch {
          json = undefined
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json })
      })
    })
    req.on('error', reject)
    if (options.body !== undefined) req.write(options.body)
    req.end()
  })
}

/** Asserts the wire error shape every failure shares, and answers it for further checks. */
function expectWireError(answer: RawAnswer, status: number, code: string): { statusCode: number; code: string; error: string; message: string } {
  expect(answer.status, `HTTP status of ${answer.text}`).toBe(status)
  expect(answer.headers['content-type']).toMatch(/^application\/json/)
  expect(answer.json).toMatchObject({ statusCode: status, code, error: expect.any(String), message: expect.any(String) })
  const wire = answer.json as { statusCode: number; code: string; error: string; message: string }
  expect(wire.error.length).toBeGreaterThan(0)
  expect(wire.message.length).toBeGreaterThan(0)
  return wire
}

let daemon: TestDaemon
let socket: string
/** The client of the transport under test: over TCP, one made with the console's URL and token. */
let client: TendClient
/** A finished task, for routes that need a real id. */
let finishedId: string

const post = (path: string, body: string) => rawRequest('POST', path, { body })

describe.each(TRANSPORTS)('over $name', (transport) => {
  beforeAll(async () => {
    via = transport
    daemon = await startTestDaemon()
    socket = join(daemon.home, 'tend.sock')
    client = daemon.client
    if (transport !== TRANSPORTS[0]) {
      const opened = await daemon.client.openConsole({ port: 0 })
      tcp = { port: opened.port!, token: opened.token! }
      client = new TendClient({ url: opened.origin!, token: opened.token!, env: {} })
    }
    const started = await client.start({ command: ['echo', 'ok'] })
    finishedId = (await client.wait(started.id)).id
  })
  afterAll(async () => {
    if (client !== daemon?.client) client?.close()
    await daemon?.stop()
    tcp = null
  })

  describe('request validation', () => {
    test('an unknown body property is a 400 that names it', async () => {
      const answer = await post('/v1/tasks', JSON.stringify({ command: ['true'], cwd: '/', bogus: 1 }))
      const wire = expectWireError(answer, 400, 'TEND_ERR_VALIDATION')
      expect(wire.message).toContain('bogus')
    })

    test('a mistyped field is a 400 that names the field and the value received', async () => {
      const answer = await post('/v1/tasks', JSON.stringify({ command: ['true'], cwd: '/', timeoutMs: '5' }))
      const wire = expectWireError(answer, 400, 'TEND_ERR_VALIDATION')
      expect(wire.message).toContain('timeoutMs')
      expect(wire.message).toContain('"5"')
    })

    test('a missing required field is a 400 that names it', async () => {
      const answer = await post('/v1/tasks', JSON.stringify({ cwd: '/' }))
      const wire = expectWireError(answer, 400, 'TEND_ERR_VALIDATION')
      expect(wire.message).toContain('command')
    })

    test('an empty command array is a 400 that names command', async () => {
      const answer = await post('/v1/tasks', JSON.stringify({ command: [], cwd: '/' }))
      const wire = expectWireError(answer, 400, 'TEND_ERR_VALIDATION')
      expect(wire.message).toContain('command')
    })

    test('a body that is not valid JSON is a 400 that says the body is at fault', async () => {
      const answer = await post('/v1/tasks', '{"command": ["true"], "cwd": ')
      const wire = expectWireError(answer, 400, 'TEND_ERR_VALIDATION')
      expect(wire.message).toMatch(/body/i)
      expect(wire.message).toMatch(/json/i)
    })

    test('every violation in one body is named in one answer', async () => {
      const answer = await post('/v1/tasks', JSON.stringify({ command: ['true'], cwd: '/', bogus: 1, maxOutputBytes: 'lots' }))
      const wire = expectWireError(answer, 400, 'TEND_ERR_VALIDATION')
      expect(wire.message).toContain('bogus')
      expect(wire.message).toContain('maxOutputBytes')
    })

    test('a rejected start leaves no task behind', async () => {
      await post('/v1/tasks', JSON.stringify({ command: ['true'], cwd: '/', bogus: 1 }))
      const tasks = await client.list({ all: true })
      expect(tasks.map((task) => task.id)).toEqual([finishedId])
    })

    test('an unknown query parameter on the output route is a 400 that names it', async () => {
      const answer = await rawRequest('GET', `/v1/tasks/${finishedId}/output?bogus=1`)
      const wire = expectWireError(answer, 400, 'TEND_ERR_VALIDATION')
      expect(wire.message).toContain('bogus')
    })

    test('a mistyped query parameter on the output route is a 400 that names it', async () => {
      const answer = await rawRequest('GET', `/v1/tasks/${finishedId}/output?from=banana`)
      const wire = expectWireError(answer, 400, 'TEND_ERR_VALIDATION')
      expect(wire.message).toContain('from')
      expect(wire.message).toContain('banana')
    })

    test('the output route still answers well-formed queries', async () => {
      const answer = await rawRequest('GET', `/v1/tasks/${finishedId}/output?from=0&maxBytes=2`)
      expect(answer.status).toBe(200)
      expect(answer.json).toMatchObject({ data: 'ok', from: 0, next: 2, truncated: true, done: false, state: 'exited' })
    })
  })

  describe('task ids and routes', () => {
    const badIds = ['..%2F..%2Fetc', '..%2Fdecoy', 'ABCDEFGHIJKL', 'ABC', 'a'.repeat(13), 'a'.repeat(300), 'abcdefghijk%00', '%2E%2E', '%zz', 'abc%']

    test.each(badIds)('the malformed id %s is refused with TEND_ERR_INVALID_TASK_ID on every task route', async (badId) => {
      const routes: Array<[string, string, string?]> = [
        ['GET', `/v1/tasks/${badId}`],
        ['GET', `/v1/tasks/${badId}/output`],
        ['GET', `/v1/tasks/${badId}/wait?timeoutMs=0`],
        ['POST', `/v1/tasks/${badId}/kill`, '{}'],
        ['DELETE', `/v1/tasks/${badId}`],
      ]
      for (const [method, path, body] of routes) {
        const answer = await rawRequest(method, path, { body })
        const wire = expectWireError(answer, 400, 'TEND_ERR_INVALID_TASK_ID')
        expect(wire.message.length, 'the message stays short however long the id').toBeLessThan(200)
      }
    })

    test('a path the router cannot decode outside the task routes is a 400 TEND_ERR_VALIDATION', async () => {
      const answer = await rawRequest('GET', '/v1/%zz')
      const wire = expectWireError(answer, 400, 'TEND_ERR_VALIDATION')
      expect(wire.message).toContain('url')
    })

    test('path traversal through any route neither reads nor deletes anything outside the spool', async () => {
      // A decoy shaped like a task folder, one level above the spool.
      const decoy = join(daemon.home, 'decoy')
      mkdirSync(decoy, { recursive: true })
      const secret = 'decoy output that must never be served'
      writeFileSync(join(decoy, 'output.log'), secret)
      writeFileSync(join(decoy, 'task.json'), JSON.stringify({ id: 'decoy', state: 'exited', secret }))
      const attempts: Array<[string, string]> = [
        ['GET', '/v1/tasks/..%2Fdecoy'],
        ['GET', '/v1/tasks/..%2Fdecoy/output'],
        ['DELETE', '/v1/tasks/..%2Fdecoy'],
        ['GET', '/v1/tasks/../decoy/output'],
        ['DELETE', '/v1/tasks/../decoy'],
        ['GET', '/v1/tasks/%2E%2E/decoy/output'],
        ['DELETE', '/v1/tasks/%2E%2E%2Fdecoy'],
        ['GET', '/v1/tasks/..%252Fdecoy/output'],
      ]
      for (const [method, path] of attempts) {
        const answer = await rawRequest(method, path)
        expect([400, 404], `${method} ${path} answered ${answer.status}`).toContain(answer.status)
        const wire = answer.json as { code: string }
        expect(['TEND_ERR_INVALID_TASK_ID', 'TEND_ERR_ROUTE_NOT_FOUND'], `${method} ${path}`).toContain(wire.code)
        expect(answer.text).not.toContain(secret)
      }
      expect(readFileSync(join(decoy, 'output.log'), 'utf8')).toBe(secret)
      expect(existsSync(join(decoy, 'task.json'))).toBe(true)
      expect(existsSync(join(daemon.home, 'spool'))).toBe(true)
      expect((await client.get(finishedId)).state).toBe('exited')
    })

    test('an unknown route is a 404 TEND_ERR_ROUTE_NOT_FOUND naming the method and path', async () => {
      const pagePaths = via === TRANSPORTS[0] ? [['GET', '/'] as const] : []
      for (const [method, path] of [
        ['GET', '/v1/nope'],
        ...pagePaths,
        ['PUT', '/v1/tasks'],
        ['GET', `/v1/tasks/${finishedId}/nope`],
        ['POST', '/v2/tasks'],
      ] as const) {
        const answer = await rawRequest(method, path, { body: method === 'GET' ? undefined : '{}' })
        const wire = expectWireError(answer, 404, 'TEND_ERR_ROUTE_NOT_FOUND')
        expect(wire.message).toContain(method)
        expect(wire.message).toContain(path)
      }
    })

    test('an unknown task id of the right shape is a 404 TEND_ERR_TASK_NOT_FOUND on every task route', async () => {
      const unknown = 'zzzzzzzzzzzz'
      const routes: Array<[string, string, string?]> = [
        ['GET', `/v1/tasks/${unknown}`],
        ['GET', `/v1/tasks/${unknown}/output`],
        ['GET', `/v1/tasks/${unknown}/wait?timeoutMs=0`],
        ['POST', `/v1/tasks/${unknown}/kill`, '{}'],
        ['DELETE', `/v1/tasks/${unknown}`],
      ]
      for (const [method, path, body] of routes) {
        const answer = await rawRequest(method, path, { body })
        const wire = expectWireError(answer, 404, 'TEND_ERR_TASK_NOT_FOUND')
        expect(wire.message).toContain(unknown)
      }
    })

    test('GET /v1/openapi.json answers an OpenAPI 3 document that lists the task routes', async () => {
      const answer = await rawRequest('GET', '/v1/openapi.json')
      expect(answer.status).toBe(200)
      const document = answer.json as { openapi: string; info: { title: string }; paths: Record<string, Record<string, unknown>> }
      expect(document.openapi).toMatch(/^3\./)
      expect(document.paths['/v1/tasks']).toHaveProperty('post')
      expect(document.paths['/v1/tasks']).toHaveProperty('get')
      expect(document.paths['/v1/tasks/{id}']).toHaveProperty('get')
      expect(document.paths['/v1/tasks/{id}']).toHaveProperty('delete')
      expect(document.paths['/v1/tasks/{id}/output']).toHaveProperty('get')
    })
  })

  describe('the typed client', () => {
    test('turns a wire 404 back into a TendError with its code, status and retryability', async () => {
      const error = await client.get('zzzzzzzzzzzz').catch((caught: unknown) => caught)
      expect(error).toBeInstanceOf(TendError)
      expect(isTendError(error, 'TEND_ERR_TASK_NOT_FOUND')).toBe(true)
      expect(error).toMatchObject({ code: 'TEND_ERR_TASK_NOT_FOUND', statusCode: 404, retryable: false, blame: 'caller' })
      expect((error as TendError).message).toContain('zzzzzzzzzzzz')
    })

    test('turns a validation 400 back into a TendError that keeps the message naming the field', async () => {
      const error = await client.start({ command: ['true'], timeoutMs: 1.5 }).catch((caught: unknown) => caught)
      expect(isTendError(error, 'TEND_ERR_VALIDATION')).toBe(true)
      expect(error).toMatchObject({ statusCode: 400, retryable: false })
      expect((error as TendError).message).toContain('timeoutMs')
    })

    test('turns a malformed id into TEND_ERR_INVALID_TASK_ID', async () => {
      const error = await client.read('../../etc').catch((caught: unknown) => caught)
      expect(isTendError(error, 'TEND_ERR_INVALID_TASK_ID')).toBe(true)
      expect(error).toMatchObject({ statusCode: 400, retryable: false })
    })

    test('reports a conflict on a running task as retryable', async () => {
      const started = await client.start({ command: ['sleep', '30'] })
      try {
        const error = await client.remove(started.id).catch((caught: unknown) => caught)
        expect(isTendError(error, 'TEND_ERR_TASK_NOT_FINISHED')).toBe(true)
        expect(error).toMatchObject({ statusCode: 409, retryable: true })
      } finally {
        await client.kill(started.id)
      }
    })

    test('without a daemon and without autostart, fails with retryable TEND_ERR_DAEMON_UNAVAILABLE', async () => {
      const home = createTempHome()
      // Over TCP: a port nobody listens on (a URL never starts a daemon).
      const nobody =
        via === TRANSPORTS[0] ? new TendClient({ home, autoStart: false }) : new TendClient({ home, url: 'http://127.0.0.1:9', token: tcp!.token, env: {} })
      try {
        const error = await nobody.status().catch((caught: unknown) => caught)
        expect(isTendError(error, 'TEND_ERR_DAEMON_UNAVAILABLE')).toBe(true)
        expect(error).toMatchObject({ retryable: true })
      } finally {
        nobody.close()
        rmSync(home, { recursive: true, force: true })
      }
    })
  })

  describe('listing tasks', () => {
    test('GET /v1/tasks answers each task as GET /v1/tasks/:id does, a running one with its output size now, as JSON', async () => {
      const running = await client.start({ command: ['sh', '-c', 'printf 12345; exec sleep 30'] })
      try {
        // Reported running once its running record is on disk, which can be after its first bytes.
        await waitFor(
          'the task to be reported running with 5 bytes written',
          async () => (await client.read(running.id)).next === 5 && (await client.get(running.id)).state === 'running',
        )
        for (const path of ['/v1/tasks', '/v1/tasks?all=true']) {
          const answer = await rawRequest('GET', path)
          expect(answer.status).toBe(200)
          expect(answer.headers['content-type']).toBe('application/json; charset=utf-8')
          const { tasks } = answer.json as { tasks: Array<{ id: string }> }
          const one = async (id: string) => (await rawRequest('GET', `/v1/tasks/${id}`)).json
          expect(tasks, path).toEqual(await Promise.all(tasks.map((task) => one(task.id))))
          expect(
            tasks.find((task) => task.id === running.id),
            path,
          ).toMatchObject({ state: 'running', outputBytes: 5 })
        }
      } finally {
        await client.kill(running.id)
        await client.remove(running.id)
      }
    })
  })
})
