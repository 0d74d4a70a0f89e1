import { describe, expect, test } from 'vitest'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as tendPlugin from '../../tools/index.js'
import { pluginPerFile } from '../harness/plugin-per-file.js'
import { callTool, createHost, TestAgent, textOf } from '../harness/host.js'
import { textWithCost } from '../helpers/cost-line.js'
import { waitFor } from '../helpers/wait-for.js'

const shared = pluginPerFile('notices')

const idIn = (text: string) => /Started background task ([0-9a-z]{12})/.exec(text)![1]!

/** /usr/bin's: a sandbox shows the system's folders, not a user's pyenv. */
const PYTHON = '/usr/bin/python3'
/**
 * 200 MiB written (a bytes repeat fills every page) and given back (its peak stays), then CPU time
 * spent until the process has used one second of it; then it prints what it used, by its own clock
 * (`cpu_ms=N`), and exits with little left to tear down. A busy loop may pass the second by a good
 * deal where the process clock moves in steps (0.1 to 0.2 s on a virtual machine measured here):
 * the notice is held to what the process says it used.
 */
const TOUCH_200_MIB_THEN_BUSY_SECOND =
  'import time; data = b"\\x01" * (200 << 20); del data; exec("while time.process_time() < 1.0: pass"); print("cpu_ms=%d" % (time.process_time() * 1000))'

/** A span the notice writes (`350 ms`, `1.1 s`; minutes are not expected here) in milliseconds. */
function spanMs(text: string): number {
  const [, value, unit] = /^(\d+(?:\.\d)?) (ms|s)$/.exec(text) ?? []
  if (value === undefined) throw new Error(`not a span of ms or s: ${text}`)
  return Number(value) * (unit === 's' ? 1000 : 1)
}

/** A size the notice writes in MiB (`212 MiB`, `1.2 GiB`) in MiB. */
function sizeMiB(text: string): number {
  const [, value, unit] = /^(\d+(?:\.\d)?) (MiB|GiB)$/.exec(text) ?? []
  if (value === undefined) throw new Error(`not a size in MiB or GiB: ${text}`)
  return Number(value) * (unit === 'GiB' ? 1024 : 1)
}

/** Starts a background task and a marker task after it; once the marker's notice is in, any notice for the first would be too. */
async function backgroundThenMarker(agent: TestAgent, command: string): Promise<{ id: string; markerId: string }> {
  const id = idIn(textOf(await callTool(shared.host, agent, { name: 'bash', arguments: { command, run_in_background: true } })))
  return { id, markerId: '' }
}

async function settleWithMarker(agent: TestAgent): Promise<string> {
  const markerId = idIn(
    textOf(await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'true', run_in_background: true, description: 'marker' } })),
  )
  await waitFor('the marker notice', () => agent.notices().some((notice) => notice.includes(markerId)))
  return markerId
}

describe('completion notices', () => {
  test('no notice when the agent read the task to its end', async () => {
    const agent = new TestAgent('notice-read')
    const gate = mkdtempSync(join(tmpdir(), 'tend-gate-'))
    const { id } = await backgroundThenMarker(agent, `while [ ! -e ${gate}/go ]; do sleep 0.01; done`)
    // The read is waiting when the task ends, so it is the read that shows the ending.
    const read = callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, wait_ms: 30_000 } })
    await waitFor('the read to be in flight', async () => (await shared.daemon.client.get(id)).state === 'running')
    writeFileSync(join(gate, 'go'), '')
    expect(textOf(await read)).toContain('[exit code: 0]')
    await settleWithMarker(agent)
    expect(agent.notices().filter((notice) => notice.includes(id))).toEqual([])
    rmSync(gate, { recursive: true, force: true })
  })

  test('no notice when the agent killed the task, or ran it in the foreground', async () => {
    const agent = new TestAgent('notice-kill')
    const { id } = await backgroundThenMarker(agent, 'sleep 30')
    await callTool(shared.host, agent, { name: 'task_kill', arguments: { task_id: id } })
    await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'echo foreground' } })
    await settleWithMarker(agent)
    expect(agent.notices().filter((notice) => !notice.includes('(marker)'))).toEqual([])
  })

  test('a notice that cannot be delivered rides on the next tend tool result, once', async () => {
    const agent = new TestAgent('notice-undelivered')
    agent.failInjects = true
    const { id } = await backgroundThenMarker(agent, 'exit 2')
    await shared.daemon.client.wait(id)
    const expected = textWithCost(`background task ${id} (exit 2) finished [status: exited, exit code: 2]. Read its output with task_output.`, 'exited 2')
    const list = await waitFor('the notice to ride on a tool result', async () => {
      const result = await callTool(shared.host, agent, { name: 'task_list', arguments: {} })
      return result.content.length > 1 ? result : undefined
    })
    expect(list.content[1]).toEqual({ type: 'text', text: expect.stringMatching(expected) })
    const next = await callTool(shared.host, agent, { name: 'task_list', arguments: {} })
    expect(next.content).toHaveLength(1)
  })

  test("the cost in a notice is the task's own: a second of CPU and 200 MiB touched read as about 1 s and 200 MiB", async () => {
    const agent = new TestAgent('notice-cost')
    const command = `${PYTHON} -c '${TOUCH_200_MIB_THEN_BUSY_SECOND}'`
    const started = await callTool(shared.host, agent, { name: 'bash', arguments: { command, run_in_background: true, description: 'cost probe' } })
    const id = idIn(textOf(started))
    const notice = await waitFor(`the notice of task ${id}`, () => agent.notices().find((text) => text.includes(id)), 60_000)
    expect(notice).toMatch(
      textWithCost(`background task ${id} (cost probe) finished [status: exited, exit code: 0]. Read its output with task_output.`, 'exited 0'),
    )
    const [, cpu, peak] = / · CPU (.+) · peak (.+?)(?: \(largest process\))?\]$/.exec(notice)!
    const said = /cpu_ms=(\d+)/.exec((await shared.daemon.client.read(id)).data)
    expect(said, 'the probe did not say what it used').not.toBeNull()
    const ownMs = Number(said![1])
    expect(ownMs).toBeGreaterThanOrEqual(1000)
    // The notice's figure is the process's own (rounded to 0.1 s), plus its start and exit: no more.
    expect(spanMs(cpu!), `${notice} (the process said ${ownMs} ms)`).toBeGreaterThanOrEqual(ownMs - 100)
    expect(spanMs(cpu!), `${notice} (the process said ${ownMs} ms)`).toBeLessThanOrEqual(ownMs + 150)
    expect(sizeMiB(peak!), notice).toBeGreaterThanOrEqual(200)
    expect(sizeMiB(peak!), notice).toBeLessThanOrEqual(220)
  })

  test('a notice goes only to the owner, never to another agent', async () => {
    const alice = new TestAgent('notice-alice')
    const bob = new TestAgent('notice-bob')
    await callTool(shared.host, bob, { name: 'task_list', arguments: {} })
    const { id } = await backgroundThenMarker(alice, 'echo for alice')
    await waitFor('alice to be told', () => alice.notices().some((notice) => notice.includes(id)))
    await settleWithMarker(bob)
    expect(bob.notices().filter((notice) => notice.includes(id))).toEqual([])
  })
})

describe('owners', () => {
  test("agent B cannot read or kill agent A's task through the tools", async () => {
    const alice = new TestAgent('owner-alice')
    const bob = new TestAgent('owner-bob')
    const { id } = await backgroundThenMarker(alice, 'sleep 30')
    await waitFor('the task to run', async () => (await shared.daemon.client.get(id)).state === 'running')
    const read = await callTool(shared.host, bob, { name: 'task_output', arguments: { task_id: id } })
    const kill = await callTool(shared.host, bob, { name: 'task_kill', arguments: { task_id: id } })
    expect(read).toMatchObject({ isError: true, content: [{ text: `task not found: ${id}` }] })
    expect(kill).toMatchObject({ isError: true, content: [{ text: `task not found: ${id}` }] })
    expect((await shared.daemon.client.get(id)).state).toBe('running')
    await callTool(shared.host, alice, { name: 'task_kill', arguments: { task_id: id } })
  })
})

describe('agent disposal and aborts', () => {
  test('disposing an agent stops its running background tasks', async () => {
    const agent = new TestAgent('dispose-stop')
    const { id } = await backgroundThenMarker(agent, 'sleep 30')
    await waitFor('the task to run', async () => (await shared.daemon.client.get(id)).state === 'running')
    agent.dispose()
    const task = await waitFor('the task to be stopped', async () => {
      const current = await shared.daemon.client.get(id)
      return current.state === 'killed' ? current : undefined
    })
    expect(task.reason).toBe('killed by request (SIGTERM): its agent was disposed')
  })

  test('a task started with bash persistent: true outlives its agent; its owner task does not (stopped by session-end)', async () => {
    const agent = new TestAgent('dispose-persistent')
    const kept = idIn(
      textOf(await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'sleep 30', run_in_background: true, persistent: true } })),
    )
    const stopped = idIn(textOf(await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'sleep 30', run_in_background: true } })))
    await waitFor(
      'both tasks to run',
      async () => (await shared.daemon.client.get(kept)).state === 'running' && (await shared.daemon.client.get(stopped)).state === 'running',
    )
    expect((await shared.daemon.client.get(kept)).lifetime).toBe('persistent')
    agent.dispose()
    const ended = await waitFor('the owner task to be stopped', async () => {
      const current = await shared.daemon.client.get(stopped)
      return current.state === 'killed' ? current : undefined
    })
    expect(ended.stoppedBy).toBe('session-end')
    expect((await shared.daemon.client.get(kept)).state).toBe('running')
    // The agent comes back with the same owner id: its persistent task is there, and it can stop it.
    const back = new TestAgent('dispose-persistent')
    expect(textOf(await callTool(shared.host, back, { name: 'task_list', arguments: {} }))).toContain(kept)
    const killed = await callTool(shared.host, back, { name: 'task_kill', arguments: { task_id: kept } })
    expect(textOf(killed)).toContain('stopped by: owner')
  })

  test('with stopTasksOnDispose: false the tasks keep running', async () => {
    const keepHost = createHost()
    const keepFork = keepHost.plugin(tendPlugin, { home: shared.daemon.home, stopTasksOnDispose: false })
    await waitFor('the tools to be registered', () => keepHost.tools.tools.size === 5)
    const agent = new TestAgent('dispose-keep')
    const id = idIn(textOf(await callTool(keepHost, agent, { name: 'bash', arguments: { command: 'sleep 30', run_in_background: true } })))
    await waitFor('the task to run', async () => (await shared.daemon.client.get(id)).state === 'running')
    agent.dispose()
    const marker = await shared.daemon.client.start({ command: ['true'], owner: 'dispose-keep' })
    await shared.daemon.client.wait(marker.id)
    expect((await shared.daemon.client.get(id)).state).toBe('running')
    await shared.daemon.client.kill(id)
    keepFork.dispose()
  })

  test('an abort before the task is admitted starts nothing', async () => {
    const agent = new TestAgent('abort-before')
    const controller = new AbortController()
    controller.abort()
    const result = await callTool(shared.host, agent, {
      name: 'bash',
      arguments: { command: 'echo never', run_in_background: true },
      signal: controller.signal,
    })
    expect(result).toMatchObject({ isError: true, content: [{ text: 'aborted before the task was started; nothing was run' }] })
    expect(await shared.daemon.client.list({ owner: 'abort-before', all: true })).toEqual([])
  })

  test('an abort after the id is returned does not kill a background task', async () => {
    const agent = new TestAgent('abort-after')
    const controller = new AbortController()
    const result = await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'sleep 30', run_in_background: true }, signal: controller.signal })
    controller.abort()
    const id = idIn(textOf(result))
    await waitFor('the background task to run', async () => (await shared.daemon.client.get(id)).state === 'running')
    expect(await shared.daemon.client.list({ owner: 'abort-after' })).toHaveLength(1)
    await shared.daemon.client.kill(id)
  })

  test('an abort of a foreground call stops its task', async () => {
    const agent = new TestAgent('abort-foreground')
    const controller = new AbortController()
    const call = callTool(shared.host, agent, { name: 'bash', arguments: { command: 'sleep 30' }, signal: controller.signal })
    const [task] = await waitFor('the foreground task to run', async () => {
      const tasks = await shared.daemon.client.list({ owner: 'abort-foreground' })
      return tasks.length === 1 && tasks[0]!.state === 'running' ? tasks : undefined
    })
    controller.abort()
    expect(await call).toMatchObject({ isError: true, content: [{ text: `aborted; foreground task ${task!.id} was stopped` }] })
    expect((await shared.daemon.client.get(task!.id)).state).toBe('killed')
  })
})
