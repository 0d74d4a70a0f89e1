import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { Agent } from 'node:http'
import { join } from 'node:path'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { isAlive } from '../helpers/processes.js'
import { rawRequest, type RawAnswer } from '../helpers/raw-http.js'

/**
 * A seeded fuzz of the HTTP API, generated from the daemon's own OpenAPI document: wrong types,
 * out-of-range numbers, unknown fields, broken JSON, malformed headers and ids, on every route.
 * The daemon must answer every request, never with a 5xx, every error as JSON with a TEND_ERR_*
 * code. TEND_FUZZ_SEED and TEND_FUZZ_REQUESTS replay or widen a run. The daemon's memory over such a
 * storm is a target, measured by bench/request-memory.js.
 */
const SEED = Number(process.env.TEND_FUZZ_SEED ?? 20_261_130)
const REQUESTS = Number(process.env.TEND_FUZZ_REQUESTS ?? 10_000)
const CONNECTIONS = 4
const ANSWER_TIMEOUT_MS = 10_000

interface JsonSchema {
  type?: string
  properties?: Record<string, JsonSchema>
  required?: string[]
  additionalProperties?: boolean | JsonSchema
  items?: JsonSchema
  enum?: unknown[]
  anyOf?: JsonSchema[]
  minimum?: number
  maximum?: number
  minItems?: number
  minLength?: number
  maxLength?: number
  pattern?: string
}
interface Parameter {
  in: 'path' | 'query' | 'header'
  name: string
  schema: JsonSchema
}
interface Operation {
  method: string
  path: string
  parameters: Parameter[]
  body?: JsonSchema
}
interface FuzzRequest {
  index: number
  method: string
  path: string
  headers: Record<string, string>
  body?: string
}

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
function createRandom(seed: number) {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
  const int = (below: number) => Math.floor(next() * below)
  return { next, int, chance: (p: number) => next() < p, pick: <T>(items: readonly T[]): T => items[int(items.length)]! }
}
type Random = ReturnType<typeof createRandom>

function operationsOf(document: {
  paths: Record<string, Record<string, { parameters?: Parameter[]; requestBody?: { content?: Record<string, { schema: JsonSchema }> } }>>
}): Operation[] {
  const operations: Operation[] = []
  for (const [path, methods] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      const parameters = (operation.parameters ?? []).filter(
        (parameter, index, all) => all.findIndex((other) => other.in === parameter.in && other.name === parameter.name) === index,
      )
      operations.push({ method: method.toUpperCase(), path, parameters, body: operation.requestBody?.content?.['application/json']?.schema })
    }
  }
  return operations
}

const SAFE_COMMANDS = [['true'], ['echo', 'fuzz'], ['/bin/false'], ['no-such-program-for-fuzz']]
const OWNERS = ['agent-a', 'agent-b', 'operator', 'a.b:c@d-e']
const BAD_OWNERS = ['', ' ', 'bad owner', '-dash', 'x'.repeat(129), 'a/b', 'é', 'a,b']
const LONG_POLL_FIELDS = new Set(['waitMs', 'timeoutMs'])
/** Values of the wrong type or out of any range, as JSON and as text. */
const BAD_NUMBERS = [-1, 1.5, 1e308, -1e308, 2 ** 53 + 2, 2 ** 31, 2 ** 63, 0.000001, -0]
const BAD_VALUES: unknown[] = [null, true, 'x', '', '12', [], [1], {}, { a: 1 }, 'Infinity', 'NaN', '\u0000', 'a\u0000b', 'ü'.repeat(300)]
const BAD_TEXT = [
  '',
  'x',
  '-1',
  '1.5',
  '1e308',
  'Infinity',
  'NaN',
  '0x10',
  ' 1',
  '9007199254740993',
  '99999999999999999999999',
  'true',
  '%00',
  '%E0%A4%A',
  '[]',
  '{}',
]

/** A valid value for a schema: boundaries favoured; long polls kept short. */
function validValue(random: Random, schema: JsonSchema, name: string, context: { project: string; taskIds: () => string[] }): unknown {
  if (schema.enum) return random.pick(schema.enum)
  if (schema.anyOf) return validValue(random, random.pick(schema.anyOf), name, context)
  switch (schema.type) {
    case 'integer': {
      const low = schema.minimum ?? 0
      const high = LONG_POLL_FIELDS.has(name) ? Math.min(schema.maximum ?? 50, low + 50) : (schema.maximum ?? low + 1_000_000)
      return random.pick([low, high, low + random.int(Math.min(high - low, 1_000_000) + 1)])
    }
    case 'boolean':
      return random.chance(0.5)
    case 'array': {
      if (name === 'command') return random.pick(SAFE_COMMANDS)
      if (name === 'writablePaths') return random.chance(0.5) ? [] : [context.project]
      return Array.from({ length: random.int(3) }, () => validValue(random, schema.items ?? {}, name, context))
    }
    case 'object': {
      const value: Record<string, unknown> = {}
      for (const [key, property] of Object.entries(schema.properties ?? {})) {
        if (schema.required?.includes(key) || random.chance(0.3)) value[key] = validValue(random, property, key, context)
      }
      if (!schema.properties && typeof schema.additionalProperties === 'object') {
        for (let index = random.int(3); index > 0; index -= 1) value[`FUZZ_${index}`] = 'value'
      }
      return value
    }
    default:
      return validString(random, schema, name, context)
  }
}

function validString(random: Random, schema: JsonSchema, name: string, context: { project: string; taskIds: () => string[] }): string {
  if (name === 'cwd') return context.project
  if (name === 'owner') return random.pick(OWNERS)
  if (name === 'id') {
    // The same draws whatever the pool holds, so that a seed replays the same sequence.
    const real = random.chance(0.5)
    const position = random.next()
    const fresh = randomId(random)
    const ids = context.taskIds()
    return real && ids.length > 0 ? ids[Math.floor(position * ids.length)]! : fresh
  }
  if (name === 'signal') return random.pick(['TERM', 'SIGKILL', 'SIGUSR1', 'HUP'])
  if (schema.pattern?.startsWith('^/')) return context.project
  const length = Math.max(schema.minLength ?? 0, random.int(Math.min(schema.maxLength ?? 40, 40) + 1))
  return Array.from({ length }, () => random.pick([...'abcXYZ019 -_.'])).join('')
}

function randomId(random: Random): string {
  return Array.from({ length: 12 }, () => random.pick([...'0123456789abcdefghijklmnopqrstuvwxyz'])).join('')
}

/** A wrong value for a field: wrong type, out of range, broken text. */
function invalidValue(random: Random, schema: JsonSchema): unknown {
  if (schema.type === 'integer' && random.chance(0.6)) {
    return random.pick([...BAD_NUMBERS, (schema.maximum ?? 2 ** 53) + 1, (schema.minimum ?? 0) - 1])
  }
  return random.pick(BAD_VALUES)
}

function generate(random: Random, operations: Operation[], index: number, context: { project: string; taskIds: () => string[] }): FuzzRequest {
  const operation = random.pick(operations)
  let method = operation.method
  if (random.chance(0.03)) method = random.pick(['PUT', 'PATCH', 'OPTIONS', 'DELETE', 'HEAD', 'TRACE'])
  else if (method === 'GET' && random.chance(0.05)) method = 'HEAD'
  // Most requests carry at least one fault; the rest are valid and do real work.
  const faulty = random.chance(0.8)
  const fault = () => faulty && random.chance(0.4)
  let path = operation.path
  const query: string[] = []
  const headers: Record<string, string> = {}
  for (const parameter of operation.parameters) {
    const name = parameter.name
    if (parameter.in === 'path') {
      const value = fault()
        ? random.pick(['', 'ABCDEFGHIJKL', 'short', '../../etc', 'a'.repeat(300), '%E0%A4%A', '%00aaaaaaaaaaa', randomId(random) + 'x'])
        : validString(random, parameter.schema, name, context)
      path = path.replace(`{${name}}`, value)
      continue
    }
    // The wait route waits for its whole timeout by default: a valid request always bounds it.
    const required = operation.path.endsWith('/wait') && name === 'timeoutMs'
    if (!required && !random.chance(0.5)) continue
    const value = fault()
      ? String(random.chance(0.5) ? random.pick(BAD_TEXT) : invalidValue(random, parameter.schema))
      : String(validValue(random, parameter.schema, name, context))
    if (parameter.in === 'query')
      query.push(`${encodeURIComponent(name)}=${random.chance(0.9) ? encodeURIComponent(value) : value.replace(/[^\x21-\x7e]/g, '')}`)
    else headers[name] = value.replace(/[^\t\x20-\x7e]/g, '?')
  }
  if (fault()) {
    // An unknown parameter, or a known one given twice.
    const repeated = query.length > 0 ? query[random.int(query.length)]!.split('=')[0] : 'x'
    query.push(random.chance(0.5) ? `bogus=${random.int(10)}` : `${repeated}=2`)
  }
  if (query.length > 0) path += `?${query.join('&')}`
  if (fault()) path = random.pick([path.toUpperCase(), `${path}/extra`, path.replace('/v1/', '/v2/'), `${path}#frag`, path.replace('/v1', '/v1//'), '/', '/v1'])

  // Every route takes the owner header. Stopping the daemon and the console's control (it binds
  // ports) must always be an owner's request, refused once the request is found valid.
  const stopping = operation.path === '/v1/stop' || operation.path.startsWith('/v1/console')
  if (stopping || random.chance(0.4))
    headers['x-tend-owner'] = fault() || (stopping && random.chance(0.3)) ? random.pick(BAD_OWNERS).replace(/[^\t\x20-\x7e]/g, '?') : random.pick(OWNERS)
  if (random.chance(0.05)) headers.accept = random.pick(['text/event-stream', '*/*', 'application/xml', ''])

  let body: string | undefined
  if (operation.body && method !== 'GET' && method !== 'HEAD' && (operation.body.required?.length || random.chance(0.7))) {
    const value = validValue(random, operation.body, '', context) as Record<string, unknown>
    if (faulty) mutateBody(random, operation.body, value)
    body =
      faulty && random.chance(0.1)
        ? random.pick([
            '{',
            '{"command":',
            'null',
            '[]',
            '"text"',
            '12',
            '',
            '{"a":1}{"b":2}',
            '['.repeat(5_000) + ']'.repeat(5_000),
            `{"x":"${'y'.repeat(200_000)}"}`,
          ])
        : JSON.stringify(value)
    headers['content-type'] = fault()
      ? random.pick(['text/plain', 'application/json; charset=latin1', 'x/y', '', 'application/x-www-form-urlencoded'])
      : 'application/json'
  }
  return { index, method, path, headers, body }
}

function mutateBody(random: Random, schema: JsonSchema, value: Record<string, unknown>): void {
  const fields = Object.keys(schema.properties ?? {})
  for (let round = 1 + random.int(2); round > 0; round -= 1) {
    const field = fields.length > 0 ? random.pick(fields) : 'x'
    const choice = random.int(4)
    if (choice === 0) value[field] = invalidValue(random, schema.properties?.[field] ?? {})
    else if (choice === 1) value[`unknown_${random.int(100)}`] = random.pick(BAD_VALUES)
    else if (choice === 2) delete value[random.pick(schema.required ?? [field])]
    else value[field] = random.pick(BAD_VALUES)
  }
}

type Answer = RawAnswer

function send(socketPath: string, agent: Agent, request: FuzzRequest): Promise<Answer> {
  return rawRequest(socketPath, {
    method: request.method,
    path: request.path,
    headers: request.headers,
    body: request.body,
    agent,
    timeoutMs: ANSWER_TIMEOUT_MS,
  })
}

/** What is wrong with an answer, or undefined when it is as the contract says. */
function checkAnswer(request: FuzzRequest, answer: Answer): string | undefined {
  if (answer.status >= 500) return `a ${answer.status}`
  if (answer.status < 400 || request.method === 'HEAD') return undefined
  let wire: { code?: unknown; statusCode?: unknown }
  try {
    wire = JSON.parse(answer.text) as typeof wire
  } catch {
    return `an error that is not JSON (${answer.contentType})`
  }
  if (typeof wire.code !== 'string' || !/^TEND_ERR_[A-Z_]+$/.test(wire.code)) return `an error without a TEND_ERR_* code`
  if (wire.statusCode !== answer.status) return `an error whose statusCode ${String(wire.statusCode)} is not its HTTP status`
  return undefined
}

function describeRequest(request: FuzzRequest): string {
  const body =
    request.body === undefined
      ? ''
      : ` body ${request.body.length > 300 ? `${request.body.slice(0, 300)}... (${request.body.length} characters)` : request.body}`
  return `#${request.index} ${request.method} ${request.path} headers ${JSON.stringify(request.headers)}${body}`
}

let daemon: TestDaemon
let project: string

beforeAll(async () => {
  daemon = await startTestDaemon({ env: { TEND_CONCURRENCY: '8', TEND_PER_OWNER_CONCURRENCY: '8' } })
  // Outside /tmp: a sandboxed task has a private /tmp.
  project = mkdtempSync('/var/tmp/tend-fuzz-')
})
afterAll(async () => {
  try {
    await daemon?.stop()
  } finally {
    if (project) rmSync(project, { recursive: true, force: true })
  }
})

describe('fuzzing the API from its OpenAPI document', () => {
  test(
    `${REQUESTS} seeded requests: no crash, no 5xx, every error a coded JSON`,
    async () => {
      const socketPath = join(daemon.home, 'tend.sock')
      const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS })
      const document = JSON.parse((await send(socketPath, agent, { index: -1, method: 'GET', path: '/v1/openapi.json', headers: {} })).text)
      const operations = operationsOf(document)
      expect(operations.map((operation) => `${operation.method} ${operation.path}`).sort()).toContain('POST /v1/tasks')

      const random = createRandom(SEED)
      const taskIds: string[] = []
      const context = { project, taskIds: () => taskIds }
      const failures: string[] = []
      const counts = { sent: 0, ok: 0, clientErrors: 0, serverErrors: 0, started: 0 }
      let next = 0
      const runUntil = async (end: number) => {
        const worker = async () => {
          while (next < end && failures.length < 20) {
            const request = generate(random, operations, next++, context)
            let answer: Answer
            try {
              answer = await send(socketPath, agent, request)
            } catch (error) {
              failures.push(`seed ${SEED}: ${describeRequest(request)} got no answer: ${(error as Error).message}`)
              continue
            }
            counts.sent += 1
            if (answer.status >= 500) counts.serverErrors += 1
            else if (answer.status >= 400) counts.clientErrors += 1
            else counts.ok += 1
            if (answer.status === 201 && request.method === 'POST') {
              counts.started += 1
              taskIds.push((JSON.parse(answer.text) as { id: string }).id)
            }
            const problem = checkAnswer(request, answer)
            if (problem) failures.push(`seed ${SEED}: ${describeRequest(request)} got ${problem}: ${answer.status} ${answer.text.slice(0, 300)}`)
          }
        }
        await Promise.all(Array.from({ length: CONNECTIONS }, worker))
      }

      const pid = daemon.process.pid!
      await runUntil(REQUESTS)
      agent.destroy()

      expect(failures, failures.join('\n')).toEqual([])
      expect(isAlive(pid), `the daemon (pid ${pid}) died; seed ${SEED}`).toBe(true)
      expect(counts.sent).toBe(REQUESTS)
      expect(counts.serverErrors).toBe(0)
      console.info(`fuzz seed ${SEED}: ${JSON.stringify(counts)}`)

      // Every task the fuzz started is stopped and removed; daemon.stop() then checks no process is left.
      const operator = daemon.client
      for (const task of await operator.list()) await operator.kill(task.id, { graceMs: 0 })
      await operator.gc({ olderThanMs: 0 })
      expect(await operator.list({ all: true })).toEqual([])
    },
    Math.max(60_000, REQUESTS * 10),
  )
})
