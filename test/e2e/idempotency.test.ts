import { afterEach, describe, expect, test } from 'vitest'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { rawRequest } from '../helpers/raw-http.js'
import { createTempHome, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'

const daemons: TestDaemon[] = []
afterEach(async () => {
  while (daemons.length > 0) await daemons.pop()!.stop()
})

/** A raw POST /v1/tasks with an Idempotency-Key, as a client that resends would make it. */
async function post(daemon: TestDaemon, key: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const answer = await rawRequest(join(daemon.home, 'tend.sock'), {
    method: 'POST',
    path: '/v1/tasks',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
  })
  return { status: answer.status, json: JSON.parse(answer.text) as Record<string, unknown> }
}

describe('idempotent submissions', () => {
  test('the same key and body twice: one task, both answers name it', async () => {
    const daemon = await startTestDaemon()
    daemons.push(daemon)
    const body = { command: ['echo', 'once'], cwd: '/' }
    const [first, second] = await Promise.all([post(daemon, 'submission-1', body), post(daemon, 'submission-1', body)])
    expect(first.status).toBe(201)
    expect(second.status).toBe(201)
    expect(second.json.id).toBe(first.json.id)
    const third = await post(daemon, 'submission-1', body)
    expect(third.json.id).toBe(first.json.id)
    expect(readdirSync(join(daemon.home, 'spool'))).toEqual([first.json.id])
    await daemon.client.wait(String(first.json.id))
    expect((await daemon.client.read(String(first.json.id))).data).toBe('once\n')
  })

  test('the same key with another body is refused (409), and a malformed key is a 400 naming the header', async () => {
    const daemon = await startTestDaemon()
    daemons.push(daemon)
    await post(daemon, 'key-a', { command: ['true'], cwd: '/' })
    const conflict = await post(daemon, 'key-a', { command: ['false'], cwd: '/' })
    expect(conflict).toMatchObject({ status: 409, json: { code: 'TEND_ERR_IDEMPOTENCY_CONFLICT' } })
    const malformed = await post(daemon, 'bad key with spaces', { command: ['true'], cwd: '/' })
    expect(malformed.status).toBe(400)
    expect(malformed.json.message).toContain('headers/idempotency-key')
    expect(readdirSync(join(daemon.home, 'spool'))).toHaveLength(1)
  })

  test('a retry after a daemon crash answers the task the first daemon recorded', async () => {
    const home = createTempHome()
    const first = await startTestDaemon({ home })
    const body = { command: ['echo', 'recorded'], cwd: '/' }
    const original = await post(first, 'across-a-crash', body)
    await first.client.wait(String(original.json.id))
    await first.crash()
    first.client.close()
    const second = await startTestDaemon({ home })
    daemons.push(second)
    const retry = await post(second, 'across-a-crash', body)
    expect(retry.json.id).toBe(original.json.id)
    expect(readdirSync(join(home, 'spool'))).toEqual([original.json.id])
  })
})
