import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { request } from 'node:http'
import { TendClient, type StartOptions, type Task } from '../../client/index.js'
import { OWNER_HEADER } from '../../protocol/index.js'
import { runCli } from '../helpers/cli.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { createTempHome, killEverythingOf, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * Every stop records who or what stopped the task (stoppedBy), next to its reason: one test per
 * value, each on a real daemon, checking the record the daemon answers and, where it matters, the
 * record on disk and what the CLI prints.
 */

let daemon: TestDaemon
let workspace: string
const cleanups: Array<() => Promise<void> | void> = []

beforeAll(async () => {
  daemon = await startTestDaemon()
  workspace = mkdtempSync(join(tmpdir(), 'tend-stopped-by-'))
})
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})
afterAll(async () => {
  await daemon.stop()
  rmSync(workspace, { recursive: true, force: true })
})

const readRecord = (home: string, id: string): Task & { schemaVersion: number } => JSON.parse(readFileSync(join(home, 'spool', id, 'task.json'), 'utf8'))

async function startRunning(client: TendClient, command: string, extra: Partial<StartOptions> = {}): Promise<Task> {
  const task = await client.start({ command, shell: true, cwd: workspace, ...extra })
  return waitFor(`task ${task.id} running`, async () => {
    const current = await client.get(task.id)
    return current.state === 'running' ? current : undefined
  })
}

function ownerClient(home: string, owner: string): TendClient {
  const client = new TendClient({ home, owner, autoStart: false })
  cleanups.push(() => client.close())
  return client
}

/** POST /v1/tasks/:id/kill with a raw body, to see the daemon's own answer to a bad one. */
function rawKill(home: string, id: string, body: unknown, owner?: string): Promise<{ status: number; json: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const text = JSON.stringify(body)
    const req = request(
      {
        socketPath: join(home, 'tend.sock'),
        method: 'POST',
        path: `/v1/tasks/${id}/kill`,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...(owner ? { [OWNER_HEADER]: owner } : {}) },
      },
      (res) => {
        let answer = ''
        res.on('data', (chunk: Buffer) => (answer += chunk.toString()))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(answer) as Record<string, unknown> }))
      },
    )
    req.on('error', reject)
    req.end(text)
  })
}

describe('stoppedBy', () => {
  test('a task that exits by itself, or fails to start, was stopped by nobody (null); a new task is lifetime owner', async () => {
    const started = await daemon.client.start({ command: 'exit 3', shell: true, cwd: workspace })
    expect(started).toMatchObject({ lifetime: 'owner', stoppedBy: null })
    expect(await daemon.client.wait(started.id)).toMatchObject({ state: 'exited', exitCode: 3, stoppedBy: null })
    const failed = await daemon.client.start({ command: ['/no/such/program'], cwd: workspace })
    expect(await daemon.client.wait(failed.id)).toMatchObject({ state: 'failed', stoppedBy: null })
  })

  test('operator: a kill from an unscoped client; tend show says "stopped by: operator" and tend ps shows it in the state column', async () => {
    const task = await startRunning(daemon.client, 'sleep 30')
    const killed = await daemon.client.kill(task.id)
    expect(killed).toMatchObject({ state: 'killed', signal: 'SIGTERM', stoppedBy: 'operator', reason: 'killed by request (SIGTERM)' })
    expect(readRecord(daemon.home, task.id)).toMatchObject({ state: 'killed', stoppedBy: 'operator', lifetime: 'owner' })
    const show = await runCli(['show', task.id], daemon.env)
    expect(show.exitCode).toBe(0)
    expect(show.stdout).toMatch(/^stopped by: operator \(a kill from the CLI or another unscoped client\)$/m)
    expect(show.stdout).toMatch(/^lifetime: {3}owner$/m)
    const shown = JSON.parse((await runCli(['show', task.id, '--json'], daemon.env)).stdout) as Task
    expect(shown).toMatchObject({ stoppedBy: 'operator', lifetime: 'owner' })
    const ps = await runCli(['ps', '--all'], daemon.env)
    const row = ps.stdout.split('\n').find((line) => line.startsWith(task.id))
    expect(row).toMatch(new RegExp(`^${task.id}\\s+killed\\(operator\\)\\s`))
    expect(ps.stdout.split('\n')[0]).toMatch(/^ID\s+STATE\s+EXIT\s+AGE\s+CPU\s+MEM\s+OUTPUT\s+OWNER\s+COMMAND$/)
  })

  test('owner: a kill from a client scoped to the owner, of a running task and of a queued one', async () => {
    const home = createTempHome()
    const scoped = await startTestDaemon({ home, env: { TEND_PER_OWNER_CONCURRENCY: '1' } })
    cleanups.push(() => scoped.stop())
    const agent = ownerClient(home, 'agent-owner')
    const running = await startRunning(agent, 'sleep 30')
    const queued = await agent.start({ command: 'sleep 30', shell: true, cwd: workspace })
    expect((await agent.get(queued.id)).state).toBe('queued')
    expect(await agent.kill(queued.id)).toMatchObject({ state: 'killed', startedAt: null, stoppedBy: 'owner' })
    expect(await agent.kill(running.id)).toMatchObject({ state: 'killed', stoppedBy: 'owner' })
    expect(readRecord(home, running.id).stoppedBy).toBe('owner')
    expect(readRecord(home, queued.id).stoppedBy).toBe('owner')
  })

  test('a queued task killed by the operator is stopped by operator', async () => {
    const home = createTempHome()
    const single = await startTestDaemon({ home, env: { TEND_CONCURRENCY: '1' } })
    cleanups.push(() => single.stop())
    const running = await startRunning(single.client, 'sleep 30')
    const queued = await single.client.start({ command: 'sleep 30', shell: true, cwd: workspace })
    expect(await single.client.kill(queued.id)).toMatchObject({ state: 'killed', startedAt: null, stoppedBy: 'operator', reason: 'killed before it started' })
    await single.client.kill(running.id)
  })

  test('session-end: a kill that says so (the agent session ending); any other value is a 400 naming the field', async () => {
    const agent = ownerClient(daemon.home, 'agent-session')
    const task = await startRunning(agent, 'sleep 30')
    const refused = await rawKill(daemon.home, task.id, { stoppedBy: 'timeout' }, 'agent-session')
    expect(refused).toMatchObject({
      status: 400,
      json: { code: 'TEND_ERR_VALIDATION', message: expect.stringContaining('body/stoppedBy: expected "session-end", got "timeout"') },
    })
    expect((await agent.get(task.id)).state).toBe('running')
    expect(await agent.kill(task.id, { stoppedBy: 'session-end', reason: 'its agent was disposed' })).toMatchObject({
      state: 'killed',
      stoppedBy: 'session-end',
      reason: 'killed by request (SIGTERM): its agent was disposed',
    })
  })

  test('timeout: a task stopped at its time limit', async () => {
    const task = await daemon.client.start({ command: 'sleep 30', shell: true, cwd: workspace, timeoutMs: 300 })
    expect(await daemon.client.wait(task.id)).toMatchObject({ state: 'timed_out', stoppedBy: 'timeout', reason: 'timed out after 300ms' })
    expect(readRecord(daemon.home, task.id).stoppedBy).toBe('timeout')
  })

  test('output-cap: a task stopped when its output passed the cap', async () => {
    const task = await daemon.client.start({ command: 'yes', shell: true, cwd: workspace, maxOutputBytes: 64 * 1024 })
    expect(await daemon.client.wait(task.id, { timeoutMs: 30_000 })).toMatchObject({
      state: 'killed',
      stoppedBy: 'output-cap',
      reason: expect.stringMatching(/^output cap of .* reached$/),
    })
  })

  test('memory-limit: a strict task killed by its cgroup memory limit', async (context) => {
    const status = await daemon.client.status()
    expect(status.sandbox.profiles, `strict is not available here: ${status.sandbox.missing.strict}`).toContain('strict')
    const hog = `/usr/bin/python3 -c 'chunks = []\nwhile True: chunks.append(bytearray(8 << 20))'`
    const task = await daemon.client.start({ command: hog, shell: true, cwd: workspace, sandbox: 'strict', memoryBytes: 64 * 1024 * 1024, timeoutMs: 30_000 })
    const ended = await daemon.client.wait(task.id, { timeoutMs: 40_000 })
    expect(ended).toMatchObject({ state: 'killed', signal: 'SIGKILL', stoppedBy: 'memory-limit', reason: 'memory limit of 64M reached' })
  })

  test('outside-signal: a task killed by a signal tend did not send is named as such', async () => {
    const task = await startRunning(daemon.client, 'sleep 30')
    process.kill(task.pid!, 'SIGKILL')
    const ended = await daemon.client.wait(task.id)
    expect(ended).toMatchObject({ state: 'killed', signal: 'SIGKILL', stoppedBy: 'outside-signal', reason: 'killed by SIGKILL from outside tend' })
    expect(readRecord(daemon.home, task.id).stoppedBy).toBe('outside-signal')
  })

  test('daemon-stop: tend stop stops the running task and fails the queued one, both stopped by daemon-stop', async () => {
    const home = createTempHome()
    const stopping = await startTestDaemon({ home, env: { TEND_CONCURRENCY: '1' } })
    cleanups.push(() => stopping.stop())
    const running = await startRunning(stopping.client, 'sleep 30')
    const queued = await stopping.client.start({ command: 'sleep 30', shell: true, cwd: workspace })
    const stopped = await runCli(['stop'], stopping.env)
    expect(stopped.exitCode).toBe(0)
    await waitFor('the daemon to exit', () => stopping.process.exitCode !== null || stopping.process.signalCode !== null)
    expect(readRecord(home, running.id)).toMatchObject({ state: 'killed', stoppedBy: 'daemon-stop', reason: 'daemon stopped' })
    expect(readRecord(home, queued.id)).toMatchObject({ state: 'failed', stoppedBy: 'daemon-stop', reason: 'daemon stopped before the task started' })
  })
})

describe('stoppedBy for tasks that ended while no daemon ran', () => {
  test('an outside kill while no daemon ran is outside-signal; a timeout that passed meanwhile is enforced at resume as timeout', async () => {
    const home = createTempHome()
    const first = await startTestDaemon({ home })
    const status = await first.client.status()
    // Tasks outlive the daemon only under keepers (the native spawner).
    const killedOutside = await startRunning(first.client, 'sleep 30')
    const deadline = await startRunning(first.client, 'sleep 30', { timeoutMs: 1500 })
    await waitFor(
      'both running records on disk',
      () => readRecord(home, killedOutside.id).state === 'running' && readRecord(home, deadline.id).state === 'running',
    )
    await first.crash()
    first.client.close()
    cleanups.push(async () => {
      await killEverythingOf(home)
      rmSync(home, { recursive: true, force: true })
    })
    expect(status.spawner).toBe('native')
    process.kill(killedOutside.pid!, 'SIGKILL')
    await waitFor('the keeper to record the outside kill', () => existsSync(join(home, 'spool', killedOutside.id, 'exit.json')))
    // Past the deadline before the next daemon looks.
    await waitFor('the deadline to pass', () => Date.now() > Date.parse(deadline.startedAt!) + 1500, 5000)
    const second = await startTestDaemon({ home })
    cleanups.push(() => second.stop())
    expect(await second.client.get(killedOutside.id)).toMatchObject({
      state: 'killed',
      signal: 'SIGKILL',
      stoppedBy: 'outside-signal',
      reason: 'killed by SIGKILL from outside tend, while no daemon ran',
    })
    expect(await second.client.wait(deadline.id, { timeoutMs: 20_000 })).toMatchObject({ state: 'timed_out', stoppedBy: 'timeout' })
  })
})
