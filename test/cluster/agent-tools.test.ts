import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import type { Context } from 'cordis'
import * as tendPlugin from '../../tools/index.js'
import { ClusterClient } from '../../client/cluster/index.js'
import { callTool, createHost, TestAgent, textOf } from '../harness/host.js'
import { textWithCost } from '../helpers/cost-line.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { createTempHome, daemonEnv, killEverythingOf, startTestDaemon, stopAll, TEND_BIN, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * The agent tools (the harness plugin) and `tend mcp`, unchanged, against a cluster: two worker
 * daemons with homes of their own, one real redis-server, and an agent whose machine runs no
 * daemon and reaches only Redis (and the workers' APIs, for output).
 */

/** These workers take unsandboxed jobs too (most tests here run `off`): a worker takes only workspace and strict unless told. */
const ALLOW_EVERY_PROFILE = 'off,workspace,strict'

let redis: TestRedis
let workers: TestDaemon[]
let cluster: ClusterClient
let agentHome: string
let workspace: string
let host: Context
let plugin: { dispose: () => unknown }

beforeAll(async () => {
  redis = await startRedis()
  workers = await Promise.all(
    ['east', 'west'].map((name) =>
      startTestDaemon({ env: { TEND_CLUSTER_REDIS: redis.url, TEND_CLUSTER_ALLOW_SANDBOX: ALLOW_EVERY_PROFILE, TEND_CLUSTER_NAME: name } }),
    ),
  )
  cluster = new ClusterClient(redis.url)
  agentHome = createTempHome()
  // Under /var/tmp: a sandboxed task has a /tmp of its own.
  workspace = mkdtempSync('/var/tmp/tend-cluster-tools-')
  host = createHost()
  plugin = host.plugin(tendPlugin, { home: agentHome, cluster: redis.url })
  await waitFor('the tend tools to be registered', () => host.tools.tools.size === 5)
})
afterAll(async () => {
  plugin?.dispose()
  await cluster?.close()
  await Promise.all((workers ?? []).map((worker) => worker.stop()))
  await redis?.stop()
  // The agent's machine never started a daemon of its own.
  expect(existsSync(join(agentHome, 'tend.sock'))).toBe(false)
  rmSync(agentHome, { recursive: true, force: true })
  rmSync(workspace, { recursive: true, force: true })
})

const idIn = (text: string) => /(?:Started background task|task) ([0-9a-z]{12})/.exec(text)![1]!

/** Which workers hold the task's spool folder. */
function holders(id: string): TestDaemon[] {
  return workers.filter((worker) => existsSync(join(worker.home, 'spool', id)))
}

function liveProcessesOf(id: string): number[] {
  return processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive)
}

async function background(agent: TestAgent, command: string, extra: Record<string, unknown> = {}): Promise<string> {
  const started = await callTool(host, agent, { name: 'bash', arguments: { command, run_in_background: true, cwd: workspace, ...extra } })
  expect(started.isError, textOf(started)).toBe(false)
  return idIn(textOf(started))
}

/** A marker task after the others: once its notice is in, any notice of an earlier ending is too. */
async function settle(agent: TestAgent): Promise<void> {
  const marker = await background(agent, 'true', { description: 'marker' })
  await waitFor('the marker notice', () => agent.notices().some((notice) => notice.includes(marker)))
}

describe('the agent tools against a cluster', () => {
  test('a foreground bash runs on a worker, for the agent, and returns its output and exit code', async () => {
    const agent = new TestAgent('alice')
    const result = await callTool(host, agent, { name: 'bash', arguments: { command: 'echo hello from the cluster; exit 3', cwd: workspace } })
    expect(result.isError, textOf(result)).toBe(false)
    expect(textOf(result)).toContain('hello from the cluster')
    expect(textOf(result)).toContain('[exit code: 3]')
    const meta = result.meta as { taskId: string }
    const [worker, ...more] = holders(meta.taskId)
    expect(more).toEqual([])
    expect(await worker!.client.get(meta.taskId)).toMatchObject({ owner: 'alice', state: 'exited', exitCode: 3 })
    await settle(agent)
    // Its ending was the call's own result: no notice.
    expect(agent.notices().filter((notice) => notice.includes(meta.taskId))).toEqual([])
  })

  test('task_output reads by cursor: each call returns what the agent has not seen yet; a read in flight at the end shows it, and no notice follows', async () => {
    const agent = new TestAgent('bob')
    const gate = join(workspace, 'gate-cursor')
    const id = await background(agent, `echo one; until [ -e ${gate}-1 ]; do sleep 0.02; done; echo two; until [ -e ${gate}-2 ]; do sleep 0.02; done`)
    const read = async () => textOf(await callTool(host, agent, { name: 'task_output', arguments: { task_id: id, wait_ms: 30_000 } }))
    // Lines of output (the header names the command, which has both words).
    const first = await waitFor('the first line', async () => {
      const text = await read()
      return /^one$/m.test(text) ? text : undefined
    })
    expect(first).not.toMatch(/^two$/m)
    writeFileSync(`${gate}-1`, '')
    const second = await waitFor('the second line', async () => {
      const text = await read()
      return /^two$/m.test(text) ? text : undefined
    })
    expect(second).not.toMatch(/^one$/m)
    expect(second).toContain('still running')
    // The task ends while this read waits: the read shows the ending, with no output it has shown already.
    const last = read()
    await waitFor('the read to be in flight', async () => (await cluster.get(id)).state === 'running')
    writeFileSync(`${gate}-2`, '')
    const ending = await last
    expect(ending).toContain('[exit code: 0]')
    expect(ending).not.toMatch(/^(one|two)$/m)
    // A non-consuming read from byte 0 has it all.
    const whole = textOf(await callTool(host, agent, { name: 'task_output', arguments: { task_id: id, from: 0 } }))
    expect(whole).toContain('one\ntwo')
    await settle(agent)
    expect(agent.notices().filter((notice) => notice.includes(id))).toEqual([])
  })

  test('a background task that ends unseen is announced exactly once, by inject', async () => {
    const agent = new TestAgent('carol')
    const id = await background(agent, 'exit 2')
    const expected = textWithCost(`background task ${id} (exit 2) finished [status: exited, exit code: 2]. Read its output with task_output.`, 'exited 2')
    await waitFor('the notice', () => agent.notices().some((notice) => expected.test(notice)))
    await settle(agent)
    await settle(agent)
    expect(agent.notices().filter((notice) => notice.includes(id))).toEqual([expect.stringMatching(expected)])
  })

  test('task_kill stops the whole tree on the worker, recorded as stopped by the owner; no process is left', async () => {
    const agent = new TestAgent('dave')
    const id = await background(agent, 'sleep 1000 & sleep 1000 & wait')
    await waitFor('the task to run on a worker', async () => (await cluster.get(id)).state === 'running' && liveProcessesOf(id).length > 0)
    const killed = await callTool(host, agent, { name: 'task_kill', arguments: { task_id: id } })
    expect(killed.isError, textOf(killed)).toBe(false)
    expect(liveProcessesOf(id)).toEqual([])
    expect((await cluster.get(id)).task).toMatchObject({ state: 'killed', owner: 'dave', stoppedBy: 'owner' })
    await settle(agent)
    expect(agent.notices().filter((notice) => notice.includes(id))).toEqual([])
  })

  test("task_list lists the agent's own tasks only; another agent cannot read or kill them", async () => {
    const erin = new TestAgent('erin')
    const frank = new TestAgent('frank')
    const id = await background(erin, 'sleep 1000')
    const listed = textOf(await callTool(host, erin, { name: 'task_list', arguments: {} }))
    expect(listed).toContain(id)
    expect(textOf(await callTool(host, frank, { name: 'task_list', arguments: {} }))).not.toContain(id)
    const read = await callTool(host, frank, { name: 'task_output', arguments: { task_id: id } })
    expect(read.isError).toBe(true)
    expect(textOf(read)).toContain(`task not found: ${id}`)
    const kill = await callTool(host, frank, { name: 'task_kill', arguments: { task_id: id } })
    expect(kill.isError).toBe(true)
    expect((await cluster.get(id)).state).not.toBe('killed')
    await callTool(host, erin, { name: 'task_kill', arguments: { task_id: id } })
    expect(liveProcessesOf(id)).toEqual([])
  })

  test("task_input writes to a cluster task's stdin on its worker", async () => {
    const agent = new TestAgent('grace')
    const id = await background(agent, 'read line; echo "got $line"', { stdin: true })
    await waitFor('the task to run', async () => (await cluster.get(id)).state === 'running')
    const answered = textOf(await callTool(host, agent, { name: 'task_input', arguments: { task_id: id, text: 'hello\n', yield_ms: 10_000 } }))
    expect(answered).toContain('got hello')
  })

  test("a disposed agent's tasks are stopped on their workers, as stopped by its session's end; persistent ones run on", async () => {
    const agent = new TestAgent('heidi')
    const owned = await background(agent, 'sleep 1000')
    const persistent = await background(agent, 'sleep 1000', { persistent: true })
    await waitFor('both tasks to run', async () => (await cluster.get(owned)).state === 'running' && (await cluster.get(persistent)).state === 'running')
    agent.dispose()
    await waitFor('the owned task to be stopped', async () => (await cluster.get(owned)).task?.stoppedBy === 'session-end')
    expect(liveProcessesOf(owned)).toEqual([])
    expect((await cluster.get(persistent)).state).toBe('running')
    await cluster.kill(persistent)
    expect(liveProcessesOf(persistent)).toEqual([])
  })
})

describe('the agent tools when a worker is lost', () => {
  test('a background task lost with its worker is announced once, as lost, naming the worker; task_output says so', async () => {
    const own = await startRedis()
    const pair = await Promise.all(
      ['doomed', 'steady'].map((name) =>
        startTestDaemon({
          env: { TEND_CLUSTER_REDIS: own.url, TEND_CLUSTER_ALLOW_SANDBOX: ALLOW_EVERY_PROFILE, TEND_CLUSTER_NAME: name, TEND_CLUSTER_STALL: '2s' },
        }),
      ),
    )
    const ownHost = createHost()
    const ownPlugin = ownHost.plugin(tendPlugin, { home: agentHome, cluster: own.url })
    const probe = new ClusterClient(own.url)
    let crashed: TestDaemon | undefined
    try {
      await waitFor('the tend tools to be registered', () => ownHost.tools.tools.size === 5)
      const agent = new TestAgent('ivan')
      const started = await callTool(ownHost, agent, {
        name: 'bash',
        arguments: { command: 'echo before the loss; sleep 1000', run_in_background: true, cwd: workspace },
      })
      const id = idIn(textOf(started))
      const taken = await waitFor('the task to run on a worker', async () => {
        const now = await probe.get(id)
        return now.state === 'running' ? now : null
      })
      crashed = pair[taken.worker === 'doomed' ? 0 : 1]!
      await crashed.crash()
      const notice = await waitFor('the notice of the loss', () => agent.notices().find((each) => each.includes(id)), 20_000)
      expect(notice).toContain('[status: lost, exit code: none]')
      const read = textOf(await callTool(ownHost, agent, { name: 'task_output', arguments: { task_id: id } }))
      expect(read).toContain(`worker ${taken.worker} stopped answering`)
      const marker = idIn(textOf(await callTool(ownHost, agent, { name: 'bash', arguments: { command: 'true', run_in_background: true, cwd: workspace } })))
      await waitFor('the marker notice', () => agent.notices().some((each) => each.includes(marker)))
      expect(agent.notices().filter((each) => each.includes(id))).toEqual([notice])
    } finally {
      ownPlugin.dispose()
      await probe.close()
      if (crashed) await killEverythingOf(crashed.home)
      await stopAll(...pair, own)
    }
  })
})

describe('tend mcp --cluster', () => {
  test('serves the same tools on the cluster: background bash, its notice once as a log message and on the next result, a read by cursor', async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [TEND_BIN, 'mcp', '--owner', 'mcp-agent', '--cluster', redis.url],
      env: daemonEnv(agentHome),
      stderr: 'pipe',
    })
    let stderr = ''
    transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const client = new Client({ name: 'tend-cluster-test', version: '0.0.0' })
    const logs: string[] = []
    client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => void logs.push(String(notification.params.data)))
    await client.connect(transport)
    const pid = transport.pid!
    const call = async (name: string, args: Record<string, unknown>) => {
      const result = await client.callTool({ name, arguments: args })
      return { text: (result.content as Array<{ text: string }>).map((block) => block.text).join('\n'), isError: result.isError === true }
    }
    try {
      const started = await call('bash', { command: 'echo from mcp; exit 4', run_in_background: true, cwd: workspace })
      expect(started.isError, `${started.text} ${stderr}`).toBe(false)
      const id = idIn(started.text)
      const expected = textWithCost(
        `background task ${id} (echo from mcp; exit 4) finished [status: exited, exit code: 4]. Read its output with task_output.`,
        'exited 4',
      )
      const notice = await waitFor('the notice as a log message', () => logs.find((each) => expected.test(each)))
      // Not shown to the model yet: it rides on the next result, once.
      const listed = await call('task_list', {})
      expect(listed.text).toContain(notice)
      expect((await call('task_list', {})).text).not.toContain(notice)
      const read = await call('task_output', { task_id: id })
      expect(read.text).toMatch(/^from mcp$/m)
      expect(read.text).toContain('[exit code: 4]')
      const again = await call('task_output', { task_id: id })
      expect(again.text).not.toMatch(/^from mcp$/m)
      expect((await cluster.get(id)).task).toMatchObject({ owner: 'mcp-agent', exitCode: 4 })
      expect(logs.filter((each) => each.includes(id))).toEqual([notice])
    } finally {
      await client.close()
      await waitFor(`tend mcp ${pid} to exit (stderr: ${stderr})`, () => !isAlive(pid))
    }
  })
})
