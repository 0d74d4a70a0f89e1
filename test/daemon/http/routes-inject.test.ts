import { afterEach, describe, expect, test } from 'vitest'
import { pino } from 'pino'
import { TendError, type StartTaskBody, type Task } from '../../../protocol/index.js'
import { TaskSchema } from '../../../protocol/schemas.js'
import { buildApp } from '../../../daemon/http/server.js'
import type { TendApp } from '../../../daemon/http/tend-app.js'
import { registerConsoleRoutes } from '../../../daemon/http/routes/console.js'
import { registerGcRoute } from '../../../daemon/http/routes/gc.js'
import { registerGetTaskRoute } from '../../../daemon/http/routes/get-task.js'
import { registerStartTaskRoute } from '../../../daemon/http/routes/start-task.js'
import { registerStopRoute } from '../../../daemon/http/routes/stop.js'
import { HeldOutputs } from '../../../daemon/tasks/output/held-outputs.js'
import { createQueuedTask } from '../../../daemon/tasks/transitions.js'
import { taskBase } from '../../helpers/task-base.js'

// Each route is built on an app of tend's (its compilers, error shape and audit line) with only
// the deps its file names: no daemon, no socket, requests through app.inject().

const apps: TendApp[] = []
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()))
})

async function appWith(register: (app: TendApp) => void): Promise<TendApp> {
  const app = buildApp(pino({ level: 'silent' }), { callerOf: () => ({ via: 'socket', uid: null, pid: null, owner: null }) })
  app.addSchema(TaskSchema)
  register(app)
  await app.ready()
  apps.push(app)
  return app
}

/** A store of these tasks, answering as TaskStore.get does. */
function storeOf(...tasks: Task[]) {
  return {
    get: (id: string): Task => {
      const task = tasks.find((each) => each.id === id)
      if (!task) throw new TendError('TEND_ERR_TASK_NOT_FOUND', { id })
      return task
    },
  }
}

const alicesTask = createQueuedTask(taskBase({ id: 'alicetask001', owner: 'alice' }))

describe('routes built with only their deps', () => {
  test('GET /v1/tasks/:id answers the task to the operator and to its owner, and not found to another owner', async () => {
    const app = await appWith((each) =>
      registerGetTaskRoute(each, {
        config: { layout: { spool: '/nonexistent' } },
        store: storeOf(alicesTask),
        corrupt: { visible: () => undefined },
        supervisor: { outputs: new HeldOutputs(), ports: { refresh: async () => undefined } },
      }),
    )
    const operator = await app.inject({ url: '/v1/tasks/alicetask001' })
    expect(operator.statusCode).toBe(200)
    expect(operator.json()).toMatchObject({ id: 'alicetask001', owner: 'alice', state: 'queued' })
    const owner = await app.inject({ url: '/v1/tasks/alicetask001', headers: { 'x-tend-owner': 'alice' } })
    expect(owner.json()).toMatchObject({ id: 'alicetask001' })
    const other = await app.inject({ url: '/v1/tasks/alicetask001', headers: { 'x-tend-owner': 'bob' } })
    expect(other.statusCode).toBe(404)
    expect(other.json()).toMatchObject({ code: 'TEND_ERR_TASK_NOT_FOUND', message: 'task not found: alicetask001' })
  })

  test('a malformed owner header is refused by the schema, before the handler, with the message that names the header', async () => {
    let asked = 0
    const store = { get: (id: string) => (asked++, storeOf(alicesTask).get(id)) }
    const app = await appWith((each) =>
      registerGetTaskRoute(each, {
        config: { layout: { spool: '/nonexistent' } },
        store,
        corrupt: { visible: () => undefined },
        supervisor: { outputs: new HeldOutputs(), ports: { refresh: async () => undefined } },
      }),
    )
    for (const owner of ['bad owner!', '', '-dash-first', 'x'.repeat(200)]) {
      const answer = await app.inject({ url: '/v1/tasks/alicetask001', headers: { 'x-tend-owner': owner } })
      expect(answer.statusCode, answer.body).toBe(400)
      expect(answer.json()).toMatchObject({
        code: 'TEND_ERR_VALIDATION',
        message: `invalid request: headers/x-tend-owner: expected letters, digits and ._:@- (up to 128), got ${JSON.stringify(owner)}`,
      })
    }
    expect(asked).toBe(0)
  })

  test('POST /v1/tasks hands the supervisor the body, the owner acted for and the Idempotency-Key; a malformed key is a 400 naming the header', async () => {
    const started: Array<{ request: StartTaskBody; options: unknown }> = []
    const supervisor = {
      start: async (request: StartTaskBody, options: unknown): Promise<Task> => {
        started.push({ request, options })
        return createQueuedTask(taskBase({ id: 'started00001', owner: request.owner ?? 'operator', command: request.command }))
      },
    }
    const app = await appWith((each) => registerStartTaskRoute(each, { supervisor }))
    const answer = await app.inject({
      method: 'POST',
      url: '/v1/tasks',
      headers: { 'x-tend-owner': 'alice', 'idempotency-key': 'key-1' },
      payload: { command: ['true'], cwd: '/' },
    })
    expect(answer.statusCode, answer.body).toBe(201)
    expect(answer.json()).toMatchObject({ id: 'started00001', owner: 'alice' })
    expect(started).toEqual([{ request: { command: ['true'], cwd: '/', owner: 'alice' }, options: { idempotencyKey: 'key-1', actingForOwner: true } }])

    const key = 'bad key with spaces'.repeat(10)
    const malformed = await app.inject({ method: 'POST', url: '/v1/tasks', headers: { 'idempotency-key': key }, payload: { command: ['true'], cwd: '/' } })
    expect(malformed.statusCode).toBe(400)
    expect(malformed.json()).toMatchObject({
      code: 'TEND_ERR_VALIDATION',
      message: `invalid request: headers/idempotency-key: expected 1 to 128 letters, digits or ._:-, got ${JSON.stringify(key.slice(0, 140))}`,
    })
    const otherOwner = await app.inject({
      method: 'POST',
      url: '/v1/tasks',
      headers: { 'x-tend-owner': 'alice' },
      payload: { command: ['true'], cwd: '/', owner: 'bob' },
    })
    expect(otherOwner.json()).toMatchObject({
      code: 'TEND_ERR_VALIDATION',
      message: 'invalid request: body/owner: a request acting for alice cannot start a task for bob',
    })
    expect(started).toHaveLength(1)
  })

  test('POST /v1/stop is the operator’s: an owner gets 403, the operator 202 and the stop once the answer is sent', async () => {
    const stops: Array<{ keepTasks?: boolean } | undefined> = []
    const app = await appWith((each) =>
      registerStopRoute(each, { supervisor: { tasksOutliveDaemon: true, spawnerKind: 'native' }, requestStop: (options) => stops.push(options) }),
    )
    const owner = await app.inject({ method: 'POST', url: '/v1/stop', headers: { 'x-tend-owner': 'alice' } })
    expect(owner.statusCode).toBe(403)
    expect(owner.json()).toMatchObject({ code: 'TEND_ERR_OPERATOR_ONLY' })
    expect(stops).toEqual([])
    const operator = await app.inject({ method: 'POST', url: '/v1/stop', payload: { keepTasks: true } })
    expect(operator.statusCode).toBe(202)
    expect(operator.json()).toEqual({ stopping: true, pid: process.pid, keepTasks: true })
    expect(stops).toEqual([{ keepTasks: true }])
  })

  test('POST /v1/gc collects for the owner acted for, with the default age when none is given', async () => {
    const asked: Array<[number, string | null]> = []
    const app = await appWith((each) =>
      registerGcRoute(each, {
        cleanup: { removeOlderThan: async (olderThanMs, owner) => (asked.push([olderThanMs, owner ?? null]), { removed: [], freedBytes: 0 }) },
      }),
    )
    expect((await app.inject({ method: 'POST', url: '/v1/gc', headers: { 'x-tend-owner': 'alice' } })).json()).toEqual({ removed: [], freedBytes: 0 })
    expect((await app.inject({ method: 'POST', url: '/v1/gc', payload: { olderThanMs: 5 } })).statusCode).toBe(200)
    expect(asked).toEqual([
      [24 * 3_600_000, 'alice'],
      [5, null],
    ])
  })

  test('the console control routes reach only the console they are given', async () => {
    const info = { listening: false, origin: null, url: null, token: null, host: null, port: null, tls: false, tokens: 0 }
    const calls: string[] = []
    const console = {
      info: () => (calls.push('info'), info),
      open: async () => (calls.push('open'), info),
      close: async () => (calls.push('close'), info),
      revoke: async () => (calls.push('revoke'), info),
    }
    const app = await appWith((each) => registerConsoleRoutes(each, { console }))
    expect((await app.inject({ url: '/v1/console' })).json()).toEqual(info)
    expect((await app.inject({ method: 'POST', url: '/v1/console/revoke' })).statusCode).toBe(200)
    expect((await app.inject({ method: 'DELETE', url: '/v1/console', headers: { 'x-tend-owner': 'alice' } })).json()).toMatchObject({
      code: 'TEND_ERR_OPERATOR_ONLY',
    })
    expect(calls).toEqual(['info', 'revoke'])
  })
})
