import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Message } from '@deepseek-ai/dsh-llm'
import { createHarness, say, type ModelReply } from './support/harness.js'
import { startTestDaemon, waitFor, type TestDaemon } from './support/daemon.js'
import { startedTaskId, toolCalls } from './support/session.js'

let daemon: TestDaemon
let scratch: string

beforeAll(async () => {
  daemon = await startTestDaemon()
  scratch = mkdtempSync(join(tmpdir(), 'tend-dsh-lifecycle-'))
})
afterAll(async () => {
  await daemon?.stop()
  rmSync(scratch, { recursive: true, force: true })
})

/** On the user's message, starts one background job that runs until `gate` exists. */
const starter = (gate: string) => (last: Message): ModelReply =>
  last.source.kind === 'user'
    ? { calls: [{ name: 'bash', args: { command: `while [ ! -e ${gate} ]; do sleep 0.01; done`, description: 'long job', run_in_background: true } }] }
    : { text: 'started' }

describe('agent disposal', () => {
  test('stops the agent’s running tasks by default', async () => {
    const harness = await createHarness()
    await harness.loadTend({ home: daemon.home })
    const handle = await harness.createOwnedAgent('dispose-stops', starter(join(scratch, 'never')))
    say(handle.agent, 'start')
    await handle.agent.whenIdle()
    const id = startedTaskId(toolCalls(handle.agent)[0]!.text)
    await waitFor('the task to run', async () => (await daemon.client.get(id)).state === 'running')

    await handle.dispose()
    const stopped = await waitFor('the disposed agent’s task to be stopped', async () => {
      const task = await daemon.client.get(id)
      return task.state === 'running' ? undefined : task
    })
    expect(stopped).toMatchObject({ state: 'killed', reason: expect.stringContaining('its agent was disposed') })
    await harness.dispose()
  })

  test('a task the agent started with persistent: true outlives it; its other task is stopped by session-end', async () => {
    const gate = join(scratch, 'persistent-gate')
    const harness = await createHarness()
    await harness.loadTend({ home: daemon.home })
    const job = `while [ ! -e ${gate} ]; do sleep 0.01; done`
    const handle = await harness.createOwnedAgent('dispose-persistent', (last: Message): ModelReply =>
      last.source.kind === 'user'
        ? {
            calls: [
              { name: 'bash', args: { command: job, description: 'server', run_in_background: true, persistent: true } },
              { name: 'bash', args: { command: job, description: 'scratch job', run_in_background: true } },
            ],
          }
        : { text: 'started' },
    )
    say(handle.agent, 'start')
    await handle.agent.whenIdle()
    const [kept, owned] = toolCalls(handle.agent).map((call) => startedTaskId(call.text))
    await waitFor('both tasks to run', async () => (await daemon.client.get(kept!)).state === 'running' && (await daemon.client.get(owned!)).state === 'running')

    await handle.dispose()
    const stopped = await waitFor('the owner-lifetime task to be stopped', async () => {
      const task = await daemon.client.get(owned!)
      return task.state === 'running' ? undefined : task
    })
    expect(stopped).toMatchObject({ state: 'killed', stoppedBy: 'session-end' })
    expect(await daemon.client.get(kept!)).toMatchObject({ state: 'running', lifetime: 'persistent' })
    writeFileSync(gate, '')
    expect((await daemon.client.wait(kept!)).state).toBe('exited')
    await harness.dispose()
  })

  test('keeps them with stopTasksOnDispose: false', async () => {
    const gate = join(scratch, 'kept-gate')
    const harness = await createHarness()
    const tend = await harness.loadTend({ home: daemon.home, stopTasksOnDispose: false })
    const handle = await harness.createOwnedAgent('dispose-keeps', starter(gate))
    say(handle.agent, 'start')
    await handle.agent.whenIdle()
    const id = startedTaskId(toolCalls(handle.agent)[0]!.text)
    await waitFor('the task to run', async () => (await daemon.client.get(id)).state === 'running')

    await handle.dispose()
    // Unloading the plugin waits for the agent's session to be released.
    await tend.dispose()
    expect((await daemon.client.get(id)).state).toBe('running')
    writeFileSync(gate, '')
    expect((await daemon.client.wait(id)).state).toBe('exited')
    await harness.dispose()
  })
})
