import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import * as tendPlugin from '../../tools/index.js'
import { callTool, createHost, TestAgent, textOf } from '../harness/host.js'
import { textWithCost } from '../helpers/cost-line.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

let daemon: TestDaemon

beforeAll(async () => {
  daemon = await startTestDaemon()
})
afterAll(async () => {
  await daemon.stop()
})

async function mount(config: tendPlugin.TendPluginConfig = {}) {
  const host = createHost()
  const fork = host.plugin(tendPlugin, { home: daemon.home, ...config })
  await waitFor('the tend tools to be registered', () => host.tools.tools.size === 5)
  return { host, fork }
}

describe('plugin lifecycle', () => {
  test('the plugin registers the five tools and disposing it unregisters them (HMR)', async () => {
    const { host, fork } = await mount()
    expect([...host.tools.tools.keys()].sort()).toEqual(['bash', 'task_input', 'task_kill', 'task_list', 'task_output'])
    fork.dispose()
    await waitFor('the tools to be unregistered', () => host.tools.tools.size === 0)
    const again = host.plugin(tendPlugin, { home: daemon.home })
    await waitFor('the tools to be registered again', () => host.tools.tools.size === 5)
    again.dispose()
  })

  test('the agent loop: background task, one notice after exit, task_output collects the output', async () => {
    const { host, fork } = await mount()
    const agent = new TestAgent('agent-loop-1')
    const started = await callTool(host, agent, {
      name: 'bash',
      arguments: { command: 'echo building; sleep 0.3; echo built', run_in_background: true, description: 'build' },
    })
    expect(started.isError).toBe(false)
    const id = /Started background task ([0-9a-z]{12})/.exec(textOf(started))![1]!
    // The model is idle now; the notice must arrive by itself, once, after the task ended.
    await waitFor('the completion notice', () => agent.notices().length === 1)
    expect(agent.notices()).toEqual([
      expect.stringMatching(
        textWithCost(`background task ${id} (build) finished [status: exited, exit code: 0]. Read its output with task_output.`, 'exited 0'),
      ),
    ])
    const task = await daemon.client.get(id)
    expect(task.state).toBe('exited')
    const noticeEvent = agent.events.find((event) => event.type === 'notice')!
    expect(noticeEvent.data).toMatchObject({ source: { kind: 'plugin', plugin: 'tend' } })
    const output = await callTool(host, agent, { name: 'task_output', arguments: { task_id: id } })
    expect(textOf(output)).toContain('building\nbuilt')
    expect(textOf(output)).toContain('[exit code: 0]')
    expect(agent.events.map((event) => event.type)).toEqual(['tool/call', 'tool/result', 'notice', 'tool/call', 'tool/result'])
    fork.dispose()
  })
})
