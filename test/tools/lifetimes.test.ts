import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Task } from '../../client/index.js'
import { OwnerSession } from '../../tools/core/owner-session.js'
import { runCli } from '../helpers/cli.js'
import { textWithCost } from '../helpers/cost-line.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { rawRequest } from '../helpers/raw-http.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * Lifetimes through an agent's session: the end of a session stops its owner tasks (stopped by
 * session-end) and leaves its persistent ones running, for the operator and for the next session
 * of the same owner; the notices the agent reads say who stopped each task.
 */

let daemon: TestDaemon
let workspace: string
const sessions: OwnerSession[] = []

beforeAll(async () => {
  daemon = await startTestDaemon()
  workspace = mkdtempSync(join(tmpdir(), 'tend-lifetimes-'))
})
afterEach(async () => {
  while (sessions.length > 0) await sessions.pop()!.close()
})
afterAll(async () => {
  await daemon.stop()
  rmSync(workspace, { recursive: true, force: true })
})

/** An agent's session that keeps the notices it is handed. */
async function openSession(owner: string): Promise<{ session: OwnerSession; notices: string[] }> {
  const notices: string[] = []
  const session = new OwnerSession(owner, { home: daemon.home, autoStart: false }, (text) => {
    notices.push(text)
    return true
  })
  sessions.push(session)
  await session.open()
  return { session, notices }
}

async function running(session: OwnerSession, id: string): Promise<Task> {
  return waitFor(`task ${id} running`, async () => {
    const task = await session.client.get(id)
    return task.state === 'running' ? task : undefined
  })
}

/** The daemon's answer to a GET, as JSON (the OpenAPI document). */
async function getJson(path: string): Promise<Record<string, unknown>> {
  return JSON.parse((await rawRequest(join(daemon.home, 'tend.sock'), { method: 'GET', path })).text) as Record<string, unknown>
}

describe('task lifetimes', () => {
  test("the end of an agent's session stops its owner task (stopped by session-end) and leaves its persistent task running; a later session of the same owner lists it", async () => {
    const first = await openSession('agent-lifetimes')
    // Another session of the same owner (e.g. the agent's next process) is listening meanwhile.
    const watcher = await openSession('agent-lifetimes')
    const owned = await first.session.client.start({ command: 'sleep 30', shell: true, cwd: workspace, name: 'owned' })
    const kept = await first.session.client.start({ command: 'sleep 30', shell: true, cwd: workspace, name: 'kept', lifetime: 'persistent' })
    expect(owned.lifetime).toBe('owner')
    expect(kept.lifetime).toBe('persistent')
    await running(first.session, owned.id)
    await running(first.session, kept.id)

    await first.session.stopTasks()
    expect(await daemon.client.get(owned.id)).toMatchObject({
      state: 'killed',
      stoppedBy: 'session-end',
      reason: 'killed by request (SIGTERM): its agent was disposed',
    })
    expect((await daemon.client.get(kept.id)).state).toBe('running')
    // The session that ended saw its own stop; the other one is told who stopped the task.
    expect(first.notices).toEqual([])
    const notice = await waitFor('the notice of the owner task', () => watcher.notices.find((text) => text.includes(owned.id)))
    expect(notice).toMatch(
      textWithCost(
        `background task ${owned.id} (owned) finished [status: killed, exit code: none, stopped by: session-end]. Read its output with task_output.`,
        'killed by SIGTERM',
      ),
    )

    // The operator sees the persistent task; so does the agent when it comes back with the same owner id.
    expect((await daemon.client.list()).map((task) => task.id)).toContain(kept.id)
    const ps = await runCli(['ps'], daemon.env)
    expect(ps.stdout).toContain(kept.id)
    const returning = await openSession('agent-lifetimes')
    const listed = await returning.session.client.list()
    expect(listed.map((task) => [task.id, task.lifetime, task.state])).toEqual([[kept.id, 'persistent', 'running']])

    // Its kill by the agent is stopped by owner; the listening session is told so.
    await returning.session.client.kill(kept.id)
    const killedNotice = await waitFor('the notice of the persistent task', () => watcher.notices.find((text) => text.includes(kept.id)))
    expect(killedNotice).toMatch(
      textWithCost(
        `background task ${kept.id} (kept) finished [status: killed, exit code: none, stopped by: owner]. Read its output with task_output.`,
        'killed by SIGTERM',
      ),
    )
  })

  test('a notice of a task stopped at its time limit says stopped by timeout', async () => {
    const { session, notices } = await openSession('agent-timeout')
    const task = await session.client.start({ command: 'sleep 30', shell: true, cwd: workspace, name: 'slow', timeoutMs: 300 })
    const notice = await waitFor('the timeout notice', () => notices.find((text) => text.includes(task.id)))
    expect(notice).toMatch(
      textWithCost(
        `background task ${task.id} (slow) finished [status: timed_out, exit code: none, stopped by: timeout]. Read its output with task_output.`,
        'timed out',
      ),
    )
  })

  test('a notice of a task that exited by itself is unchanged (no stopped by)', async () => {
    const { session, notices } = await openSession('agent-exit')
    const task = await session.client.start({ command: 'exit 4', shell: true, cwd: workspace, name: 'four' })
    const notice = await waitFor('the exit notice', () => notices.find((text) => text.includes(task.id)))
    expect(notice).toMatch(
      textWithCost(`background task ${task.id} (four) finished [status: exited, exit code: 4]. Read its output with task_output.`, 'exited 4'),
    )
  })

  test('tend run --persistent records lifetime persistent; tend show prints it; a bad lifetime is a 400 naming the field', async () => {
    const run = await runCli(['run', '--persistent', '--cwd', workspace, '--', 'true'], daemon.env)
    expect(run.exitCode).toBe(0)
    const id = run.stdout.trim()
    await daemon.client.wait(id)
    const show = await runCli(['show', id], daemon.env)
    expect(show.stdout).toMatch(/^lifetime: {3}persistent$/m)
    expect(JSON.parse((await runCli(['show', '--json', id], daemon.env)).stdout)).toMatchObject({ id, lifetime: 'persistent', stoppedBy: null })
    await expect(daemon.client.start({ command: ['true'], cwd: workspace, lifetime: 'forever' as never })).rejects.toMatchObject({
      code: 'TEND_ERR_VALIDATION',
      message: expect.stringContaining('body/lifetime: expected one of "owner", "persistent", got "forever"'),
    })
  })

  test('the OpenAPI document shows lifetime and stoppedBy on the task, lifetime on the start body and stoppedBy on the kill body', async () => {
    const document = (await getJson('/v1/openapi.json')) as {
      components: { schemas: Record<string, { properties: Record<string, unknown>; required?: string[] }> }
      paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: { properties: Record<string, unknown> } }> } }>>
    }
    const task = Object.values(document.components.schemas).find((schema) => schema.properties?.stoppedBy)!
    expect(task.properties.lifetime).toMatchObject({ enum: ['owner', 'persistent'] })
    expect(JSON.stringify(task.properties.stoppedBy)).toContain('outside-signal')
    expect(task.required).toEqual(expect.arrayContaining(['lifetime', 'stoppedBy']))
    const startBody = document.paths['/v1/tasks']!.post!.requestBody!.content['application/json']!.schema
    expect(startBody.properties.lifetime).toMatchObject({ enum: ['owner', 'persistent'] })
    const killBody = document.paths['/v1/tasks/{id}/kill']!.post!.requestBody!.content['application/json']!.schema
    expect(JSON.stringify(killBody.properties.stoppedBy)).toContain('session-end')
  })
})
