import { Socket } from 'node:net'
import { afterAll, beforeAll, expect, test } from 'vitest'
import type { Message } from '@deepseek-ai/dsh-llm'
import { createHarness, say } from './support/harness.js'
import { startTestDaemon, waitFor, type TestDaemon } from './support/daemon.js'
import { startedTaskId, toolCalls } from './support/session.js'

// Its own file (its own process), so the timers and connections counted are this test's alone.

let daemon: TestDaemon

beforeAll(async () => {
  daemon = await startTestDaemon()
})
afterAll(async () => {
  await daemon?.stop()
})

/** Timers, and open sockets (tend's unix-socket connections among them), in this process. */
function openResources(): { timers: number; sockets: number } {
  const timers = process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles()
  const sockets = handles.filter((handle) => handle instanceof Socket && !handle.destroyed && (handle as unknown as { _handle: unknown })._handle).length
  return { timers, sockets }
}

const TOOL_NAMES = ['bash', 'task_output', 'task_input', 'task_kill', 'task_list']

test('disposing the plugin unregisters its tools and leaves no timer or connection behind; tasks keep running, and it loads again', async () => {
  const harness = await createHarness()
  const baseline = openResources()
  const tend = await harness.loadTend({ home: daemon.home })
  expect(harness.root.tools.schemas().map((schema) => schema.name)).toEqual(TOOL_NAMES)

  const agent = harness.createAgent('plugin-disposal', (last: Message) =>
    last.source.kind === 'user' ? { calls: [{ name: 'bash', args: { command: 'sleep 300', description: 'outlives the plugin', run_in_background: true } }] } : { text: 'started' },
  )
  say(agent, 'start')
  await agent.whenIdle()
  const id = startedTaskId(toolCalls(agent)[0]!.text)
  // The agent's session follows its owner's events over a connection of its own.
  expect(openResources().sockets).toBeGreaterThan(baseline.sockets)

  await tend.dispose()
  expect(harness.root.tools.schemas()).toEqual([])
  await waitFor('the plugin’s timers and connections to be closed', () => {
    const now = openResources()
    return now.timers <= baseline.timers && now.sockets <= baseline.sockets
  })

  // Not stopped: the plugin's tasks belong to their agents, which are still there.
  expect(['queued', 'running']).toContain((await daemon.client.get(id)).state)
  // Loading it again (hot reload) registers the same tools; the task is still the agent's.
  const again = await harness.loadTend({ home: daemon.home })
  expect(harness.root.tools.schemas().map((schema) => schema.name)).toEqual(TOOL_NAMES)
  await again.dispose()
  await daemon.client.kill(id)
  await harness.dispose()
})
