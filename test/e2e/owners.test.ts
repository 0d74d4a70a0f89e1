import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { TendClient } from '../../client/index.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

let daemon: TestDaemon
let alice: TendClient
let bob: TendClient

beforeAll(async () => {
  daemon = await startTestDaemon()
  alice = new TendClient({ home: daemon.home, autoStart: false, owner: 'agent-alice' })
  bob = new TendClient({ home: daemon.home, autoStart: false, owner: 'agent-bob' })
})
afterAll(async () => {
  alice.close()
  bob.close()
  await daemon.stop()
})

describe('owner scoping in the daemon', () => {
  test("an owner cannot see, read, wait on, kill or remove another owner's task; the operator can", async () => {
    const task = await alice.start({ command: ['sleep', '1000'] })
    expect(task.owner).toBe('agent-alice')
    const notFound = { code: 'TEND_ERR_TASK_NOT_FOUND', message: `task not found: ${task.id}` }
    await expect(bob.get(task.id)).rejects.toMatchObject(notFound)
    await expect(bob.read(task.id)).rejects.toMatchObject(notFound)
    await expect(bob.wait(task.id, { timeoutMs: 0 })).rejects.toMatchObject(notFound)
    await expect(bob.kill(task.id)).rejects.toMatchObject(notFound)
    await expect(bob.remove(task.id)).rejects.toMatchObject(notFound)
    expect(await bob.list({ all: true })).toEqual([])
    expect(await bob.list({ all: true, owner: 'agent-alice' })).toEqual([])
    expect((await alice.list()).map((each) => each.id)).toEqual([task.id])
    expect((await daemon.client.list({ owner: 'agent-alice' })).map((each) => each.id)).toEqual([task.id])
    await waitFor('the task to run', async () => (await alice.get(task.id)).state === 'running')
    const killed = await daemon.client.kill(task.id, { reason: 'operator cleanup' })
    expect(killed.reason).toBe('killed by request (SIGTERM): operator cleanup')
  })

  test('an owner cannot start a task for someone else', async () => {
    await expect(alice.start({ command: ['true'], owner: 'agent-bob' })).rejects.toMatchObject({
      code: 'TEND_ERR_VALIDATION',
      message: 'invalid request: body/owner: a request acting for agent-alice cannot start a task for agent-bob',
    })
  })

  test("an owner's event stream carries only its own tasks", async () => {
    const abort = new AbortController()
    const { events } = await bob.status()
    const seen: string[] = []
    const reading = (async () => {
      for await (const event of bob.events({ since: events.lastSeq, signal: abort.signal })) {
        seen.push(`${event.owner}:${event.type}`)
        if (event.type === 'task.exited') break
      }
    })()
    const alicesTask = await alice.start({ command: ['true'] })
    await alice.wait(alicesTask.id)
    const bobsTask = await bob.start({ command: ['true'] })
    await bob.wait(bobsTask.id)
    await reading
    abort.abort()
    expect(seen).toEqual(['agent-bob:task.queued', 'agent-bob:task.started', 'agent-bob:task.exited'])
  })
})
