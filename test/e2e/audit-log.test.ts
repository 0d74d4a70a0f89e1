import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { execa } from 'execa'
import { openConsole } from '../helpers/console.js'
import { checkUnprivilegedUser, setprivArgs, startTestDaemon, TEND_BIN, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/** The constant message of the line each request that changes something leaves in daemon.log. */
const AUDIT_MESSAGE = 'change requested'

interface AuditLine {
  msg: string
  method: string
  route: string
  statusCode: number
  taskId?: string
  caller: Record<string, unknown>
}

function auditLines(daemon: TestDaemon): AuditLine[] {
  return readFileSync(join(daemon.home, 'daemon.log'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as AuditLine)
    .filter((line) => line.msg === AUDIT_MESSAGE)
}

/** `tend ARGS` as the daemon's own user (through setpriv for the test user): answers its pid and what it printed. */
async function cliAs(daemon: TestDaemon, args: string[]): Promise<{ pid: number; stdout: string }> {
  const asUser = daemon.uid === process.getuid!() ? [] : ['setpriv', ...setprivArgs(checkUnprivilegedUser()), '--']
  const [file, ...rest] = [...asUser, process.execPath, TEND_BIN, ...args]
  const child = execa(file!, rest, { env: daemon.env, extendEnv: false, reject: false, stdin: 'ignore', cwd: '/' })
  const result = await child
  expect(result.exitCode, String(result.stderr)).toBe(0)
  return { pid: child.pid!, stdout: String(result.stdout).trim() }
}

describe.each([['root', undefined] as const, ['the test user', 'unprivileged'] as const])('the audit log of a daemon run as %s', (_who, user) => {
  let daemon: TestDaemon
  beforeAll(async () => {
    daemon = await startTestDaemon({ user })
  })
  afterAll(async () => {
    await daemon?.stop()
  })

  test('every request on the socket that changes something names the uid, pid and owner that made it; reads leave no line', async () => {
    const started = await cliAs(daemon, ['run', '--owner', 'alice', '--', 'sleep', '1000'])
    const id = started.stdout
    const killed = await cliAs(daemon, ['kill', '-s', 'KILL', id])
    await cliAs(daemon, ['ps', '--all'])
    const removed = await cliAs(daemon, ['rm', id])
    const lines = await waitFor('three audit lines', () => (auditLines(daemon).length >= 3 ? auditLines(daemon) : null))
    expect(lines).toEqual([
      expect.objectContaining({
        method: 'POST',
        route: '/v1/tasks',
        statusCode: 201,
        taskId: id,
        caller: { via: 'socket', uid: daemon.uid, pid: started.pid, owner: 'alice' },
      }),
      expect.objectContaining({
        method: 'POST',
        route: '/v1/tasks/:id/kill',
        statusCode: 200,
        taskId: id,
        caller: { via: 'socket', uid: daemon.uid, pid: killed.pid, owner: null },
      }),
      expect.objectContaining({
        method: 'DELETE',
        route: '/v1/tasks/:id',
        statusCode: 200,
        taskId: id,
        caller: { via: 'socket', uid: daemon.uid, pid: removed.pid, owner: null },
      }),
    ])
  })
})

describe('the audit log of the console', () => {
  let daemon: TestDaemon
  beforeAll(async () => {
    daemon = await startTestDaemon()
  })
  afterAll(async () => {
    await daemon?.stop()
  })

  test('names a token by its id, never by the token; a planted fake token never reaches daemon.log', async () => {
    const { origin, token } = await openConsole(daemon.env)
    const fake = 'tendPlantedFakeToken0123456789abcdefghijklmnopqrstu'
    const post = (bearer: string) =>
      fetch(`${origin}/v1/tasks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
        body: JSON.stringify({ command: ['true'], cwd: daemon.home }),
      })
    const started = await post(token!)
    expect(started.status).toBe(201)
    const { id } = (await started.json()) as { id: string }
    expect((await post(fake)).status).toBe(401)
    expect((await fetch(`${origin}/?token=${fake}`, { redirect: 'manual' })).status).toBe(401)
    const tokenId = createHash('sha256').update(token!).digest('hex').slice(0, 12)
    const lines = await waitFor('two audit lines of the console', () => {
      const found = auditLines(daemon).filter((line) => line.caller.via === 'console')
      return found.length >= 2 ? found : null
    })
    expect(lines).toEqual([
      expect.objectContaining({
        method: 'POST',
        route: '/v1/tasks',
        statusCode: 201,
        taskId: id,
        caller: { via: 'console', tokenId, scope: 'operator', address: '127.0.0.1', owner: 'operator' },
      }),
      expect.objectContaining({
        method: 'POST',
        route: '/v1/tasks',
        statusCode: 401,
        caller: { via: 'console', tokenId: null, scope: null, address: '127.0.0.1', owner: null },
      }),
    ])
    const log = readFileSync(join(daemon.home, 'daemon.log'), 'utf8')
    expect(log).not.toContain(token)
    expect(log).not.toContain(fake)
  })
})
