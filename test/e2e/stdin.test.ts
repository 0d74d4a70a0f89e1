import { describe, expect, test } from 'vitest'
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { TendClient, type SandboxProfile, type Task } from '../../client/index.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { createTempHome, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { daemonPerFile, expectTendError } from '../helpers/daemon-per-file.js'
import { rawRequest } from '../helpers/raw-http.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * A task started with stdin: 'pipe' reads what POST /v1/tasks/:id/input sends: through its FIFO,
 * held by its keeper, so that the pipe lives on when the daemon does not.
 */

const shared = daemonPerFile('stdin')

async function startPiped(command: string, client: TendClient = shared.daemon.client, sandbox: SandboxProfile = 'off'): Promise<Task> {
  const task = await client.start({ command, shell: true, cwd: shared.workspace, stdin: 'pipe', sandbox })
  shared.track(task.id)
  await waitFor(`task ${task.id} running`, async () => (await client.get(task.id)).state === 'running')
  return task
}

async function outputOf(id: string, client: TendClient = shared.daemon.client): Promise<string> {
  return (await client.read(id)).data
}

describe('stdin pipes', () => {
  test('cat echoes what is sent; input.log holds exactly the bytes; eof ends cat with exit 0', async () => {
    const task = await startPiped('cat')
    expect(task.stdin).toBe('pipe')
    const first = await shared.daemon.client.input(task.id, 'hello\n')
    expect(first).toMatchObject({ acceptedBytes: 6, eof: false, inputBytes: 6 })
    await waitFor('cat to echo hello', async () => (await outputOf(task.id)) === 'hello\n')
    const raw = Buffer.from([0x00, 0xff, 0x0a, 0xc3, 0xa9, 0x0a])
    const second = await shared.daemon.client.input(task.id, raw)
    expect(second.acceptedBytes).toBe(raw.length)
    const closed = await shared.daemon.client.input(task.id, 'bye', { eof: true })
    expect(closed).toMatchObject({ acceptedBytes: 3, eof: true, inputBytes: 6 + raw.length + 3 })
    expect(closed.task.stdin).toBe('closed')
    const ended = await shared.daemon.client.wait(task.id, { timeoutMs: 10_000 })
    expect(ended).toMatchObject({ state: 'exited', exitCode: 0, stdin: 'closed' })
    const expected = Buffer.concat([Buffer.from('hello\n'), raw, Buffer.from('bye')])
    expect(readFileSync(join(task.spool, 'input.log'))).toEqual(expected)
    expect((await shared.daemon.client.read(task.id, { encoding: 'base64' })).data).toBe(expected.toString('base64'))
    expect(statSync(join(task.spool, 'input.log')).mode & 0o777).toBe(0o600)
    expect(statSync(join(task.spool, 'input.fifo')).isFIFO()).toBe(true)
    expect(statSync(join(task.spool, 'input.fifo')).mode & 0o777).toBe(0o600)
  })

  test('eof alone ends a reader that waits for the end of its input', async () => {
    const task = await startPiped('wc -c')
    await shared.daemon.client.input(task.id, 'abc')
    await shared.daemon.client.input(task.id, '', { eof: true })
    expect(await shared.daemon.client.wait(task.id, { timeoutMs: 10_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
    expect((await outputOf(task.id)).trim()).toBe('3')
  })

  test('a task does not read end-of-file while no input comes: its keeper holds the pipe', async () => {
    // `read` would end the loop at EOF; after a quiet moment the task is still waiting.
    const task = await startPiped('while read line; do echo "got $line"; done; echo eof')
    await shared.daemon.client.input(task.id, 'one\n')
    await waitFor('the first line', async () => (await outputOf(task.id)) === 'got one\n')
    const read = await shared.daemon.client.read(task.id, { from: 8, waitMs: 300 })
    expect(read).toMatchObject({ data: '', done: false })
    await shared.daemon.client.input(task.id, 'two\n', { eof: true })
    expect(await shared.daemon.client.wait(task.id, { timeoutMs: 10_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
    expect(await outputOf(task.id)).toBe('got one\ngot two\neof\n')
  })

  test('errors: no pipe, after eof, ended task, empty body, both text and base64', async () => {
    const plain = await shared.daemon.client.start({ command: 'sleep 30', shell: true, cwd: shared.workspace })
    shared.track(plain.id)
    expect(plain.stdin).toBe('null')
    await expectTendError(shared.daemon.client.input(plain.id, 'x'), 'TEND_ERR_NO_STDIN', new RegExp(`task ${plain.id} has no stdin pipe`))

    const piped = await startPiped('cat >/dev/null; sleep 30')
    await shared.daemon.client.input(piped.id, '', { eof: true })
    await expectTendError(shared.daemon.client.input(piped.id, 'late'), 'TEND_ERR_STDIN_CLOSED', /its end of input was already sent/)

    const short = await shared.daemon.client.start({ command: 'exit 0', shell: true, cwd: shared.workspace, stdin: 'pipe' })
    await shared.daemon.client.wait(short.id, { timeoutMs: 10_000 })
    await expectTendError(shared.daemon.client.input(short.id, 'x'), 'TEND_ERR_TASK_FINISHED', new RegExp(`task ${short.id} has ended \\(exited\\)`))

    const cat = await startPiped('cat')
    const empty = await postJson(`/v1/tasks/${cat.id}/input`, {})
    expect(empty).toMatchObject({
      statusCode: 400,
      code: 'TEND_ERR_VALIDATION',
      message: 'invalid request: body: expected text, base64 or eof: true, got none of them',
    })
    const both = await postJson(`/v1/tasks/${cat.id}/input`, { text: 'a', base64: 'YQ==' })
    expect(both).toMatchObject({ statusCode: 400, message: 'invalid request: body: give text or base64, not both' })
    const unknown = await postJson(`/v1/tasks/${cat.id}/input`, { txt: 'a' })
    expect(unknown).toMatchObject({ statusCode: 400, code: 'TEND_ERR_VALIDATION', message: expect.stringContaining('txt') })
    // Nothing reached the pipe of a refused input; an empty one writes nothing.
    expect(await shared.daemon.client.input(cat.id, Buffer.alloc(0))).toMatchObject({ acceptedBytes: 0, inputBytes: 0 })
    expect(existsSync(join(cat.spool, 'input.log'))).toBe(false)
  })

  test('input sent right after the start waits for the launch; a task still queued after 2 s is refused, retryable', async () => {
    const task = await shared.daemon.client.start({ command: 'cat', shell: true, cwd: shared.workspace, stdin: 'pipe' })
    shared.track(task.id)
    expect(task.state).toBe('queued')
    expect(await shared.daemon.client.input(task.id, 'early\n', { eof: true })).toMatchObject({ acceptedBytes: 6 })
    expect(await shared.daemon.client.wait(task.id, { timeoutMs: 10_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
    expect(await outputOf(task.id)).toBe('early\n')

    // One owner's slots (perOwnerConcurrency 4) all taken: its next task waits in line.
    const owner = 'busy-owner'
    const sleepers = await Promise.all(
      Array.from({ length: 4 }, () => shared.daemon.client.start({ command: 'sleep 60', shell: true, cwd: shared.workspace, owner })),
    )
    for (const sleeper of sleepers) shared.track(sleeper.id)
    const waiting = await shared.daemon.client.start({ command: 'cat', shell: true, cwd: shared.workspace, stdin: 'pipe', owner })
    shared.track(waiting.id)
    const error = await shared.daemon.client.input(waiting.id, 'x').then(
      () => null,
      (caught: unknown) => caught as Error & { code: string; retryable: boolean },
    )
    expect(error).toMatchObject({
      code: 'TEND_ERR_TASK_NOT_STARTED',
      retryable: true,
      message: `task ${waiting.id} has not started yet (queued) after 2000ms: send its input once it runs`,
    })
  })

  test('a task that does not read: what fits is written, the answer says how many bytes were taken, input.log holds exactly those', async () => {
    const task = await startPiped('sleep 60')
    const data = Buffer.alloc(200_000, 0x61)
    const error = await shared.daemon.client.input(task.id, data).then(
      () => null,
      (caught: unknown) => caught as Error & { code: string },
    )
    expect(error?.code).toBe('TEND_ERR_STDIN_FULL')
    const match = /stdin of task [a-z0-9]{12} is full: (\d+) of 200000 bytes were written in 2000ms, the rest \(from byte \1 of this input\) was not/.exec(
      error!.message,
    )
    expect(match, error!.message).not.toBeNull()
    const accepted = Number(match![1])
    expect(accepted).toBeGreaterThan(0)
    expect(accepted).toBeLessThan(data.length)
    expect(statSync(join(task.spool, 'input.log')).size).toBe(accepted)
  })

  test("an owner cannot write to another owner's task", async () => {
    const task = await startPiped('cat')
    const stranger = new TendClient({ home: shared.daemon.home, autoStart: false, owner: 'someone-else' })
    try {
      await expectTendError(stranger.input(task.id, 'x'), 'TEND_ERR_TASK_NOT_FOUND')
    } finally {
      stranger.close()
    }
  })
})

/** The daemon's answer to a GET, as JSON (the OpenAPI document). */
async function getJson(path: string): Promise<Record<string, unknown>> {
  return JSON.parse((await rawRequest(join(shared.daemon.home, 'tend.sock'), { method: 'GET', path })).text) as Record<string, unknown>
}

async function postJson(path: string, body: unknown): Promise<Record<string, unknown>> {
  const answer = await rawRequest(join(shared.daemon.home, 'tend.sock'), {
    method: 'POST',
    path,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  return JSON.parse(answer.text) as Record<string, unknown>
}

describe('the OpenAPI document', () => {
  test('shows stdin on the task and the start body, and the input route with its body and answer', async () => {
    type Schema = { properties: Record<string, unknown>; required?: string[] }
    const document = (await getJson('/v1/openapi.json')) as {
      components: { schemas: Record<string, Schema> }
      paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: Schema }> }; responses: Record<string, unknown> }>>
    }
    const task = Object.values(document.components.schemas).find((schema) => schema.properties?.stoppedBy)!
    expect(task.properties.stdin).toMatchObject({ enum: ['null', 'pipe', 'closed'] })
    const startBody = document.paths['/v1/tasks']!.post!.requestBody!.content['application/json']!.schema
    expect(startBody.properties.stdin).toMatchObject({ enum: ['null', 'pipe'] })
    const input = document.paths['/v1/tasks/{id}/input']!.post!
    expect(Object.keys(input.requestBody!.content['application/json']!.schema.properties).sort()).toEqual(['base64', 'eof', 'text'])
    expect(Object.keys(input.responses).sort()).toEqual(['200', '400', '404', '409', '410', '503'])
  })
})

describe('stdin pipes in every sandbox profile', () => {
  for (const sandbox of ['off', 'workspace', 'strict'] as const) {
    test(`${sandbox}: the sandboxed command reads what is sent and ends at eof`, async (context) => {
      const status = await shared.daemon.client.status()
      expect(status.sandbox.profiles, `${sandbox} is not available to this daemon: ${status.sandbox.missing[sandbox]}`).toContain(sandbox)
      const task = await startPiped('read line; echo "got $line"; cat; echo done', shared.daemon.client, sandbox)
      await shared.daemon.client.input(task.id, 'first\n')
      await waitFor(`the ${sandbox} task to answer`, async () => (await outputOf(task.id)) === 'got first\n')
      await shared.daemon.client.input(task.id, 'rest\n', { eof: true })
      expect(await shared.daemon.client.wait(task.id, { timeoutMs: 20_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
      expect(await outputOf(task.id)).toBe('got first\nrest\ndone\n')
    })
  }
})

describe('stdin pipes outlive the daemon', () => {
  test('after a daemon crash and a new daemon, input still reaches the task and eof still ends it', async () => {
    const home = createTempHome()
    const dir = mkdtempSync('/var/tmp/tend-stdin-crash-')
    let first: TestDaemon | undefined = await startTestDaemon({ home })
    let second: TestDaemon | undefined
    try {
      const task = await first.client.start({ command: 'while read line; do echo "got $line"; done; echo eof', shell: true, cwd: dir, stdin: 'pipe' })
      await waitFor(`task ${task.id} recorded running`, () => JSON.parse(readFileSync(join(task.spool, 'task.json'), 'utf8')).state === 'running')
      await first.client.input(task.id, 'before\n')
      await waitFor('the line sent before the crash', async () => (await first!.client.read(task.id)).data === 'got before\n')
      await first.crash()
      first.client.close()
      first = undefined
      // No daemon is writing now: the task must not have read end-of-file.
      expect(processesWithEnv(`TEND_TASK_ID=${task.id}`).filter(isAlive).length).toBeGreaterThan(0)

      second = await startTestDaemon({ home })
      expect((await second.client.get(task.id)).state).toBe('running')
      await second.client.input(task.id, 'after\n', { eof: true })
      expect(await second.client.wait(task.id, { timeoutMs: 10_000 })).toMatchObject({ state: 'exited', exitCode: 0, stdin: 'closed' })
      expect((await second.client.read(task.id)).data).toBe('got before\ngot after\neof\n')
      expect(readFileSync(join(task.spool, 'input.log'), 'utf8')).toBe('before\nafter\n')
    } finally {
      if (first) await first.stop()
      if (second) await second.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
