import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { existsSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { ClusterClient } from '../../client/cluster/index.js'
import { cliRunId, runCli } from '../helpers/cli.js'
import { waitFor } from '../helpers/wait-for.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { createTempHome, daemonEnv, startTestDaemon, stopAll, type TestDaemon } from '../helpers/test-daemon.js'

/*
 * What an operator sees of a cluster: its live workers (`tend workers`), the command and name of
 * its running tasks (`ps`, `show`), a worker's part in `tend status`, a warning for labels no live
 * worker has, and `kill --all`, which asks first. Two worker daemons on one real redis-server.
 */

/** A first job waits for a worker to join (BullMQ loaded, console opened) and for its task to start. */
const FIRST_RUN_MS = 30_000

let redis: TestRedis
let plain: TestDaemon
let gpu: TestDaemon
let cluster: ClusterClient
let submitterHome: string
let env: Record<string, string>

beforeAll(async () => {
  submitterHome = createTempHome()
  env = daemonEnv(submitterHome)
  redis = await startRedis()
  plain = await startTestDaemon({
    env: { TEND_CLUSTER_REDIS: redis.url, TEND_CLUSTER_ALLOW_SANDBOX: 'off', TEND_CLUSTER_NAME: 'plain', TEND_CLUSTER_CONCURRENCY: '4' },
  })
  gpu = await startTestDaemon({
    env: {
      TEND_CLUSTER_REDIS: redis.url,
      TEND_CLUSTER_ALLOW_SANDBOX: 'off',
      TEND_CLUSTER_NAME: 'gpu',
      TEND_CLUSTER_LABELS: 'gpu=1,zone=eu',
      TEND_CLUSTER_CONCURRENCY: '1',
    },
  })
  cluster = new ClusterClient(redis.url)
})
afterAll(async () => {
  await cluster?.close()
  await stopAll(plain, gpu)
  await redis?.stop()
  rmSync(submitterHome, { recursive: true, force: true })
})

interface ListedWorker {
  name: string
  labels: Record<string, string>
  queues: string[]
  running: number
  runningIds: string[]
  queued: number
  lastHeartbeat: string
}

async function listWorkers(): Promise<ListedWorker[]> {
  const listed = await runCli(['workers', '--json', '--cluster', redis.url], env)
  expect(listed.exitCode, listed.stderr).toBe(0)
  return JSON.parse(listed.stdout) as ListedWorker[]
}

/** A task on the gpu worker that runs until its `go` file exists (in the submitter's home). */
async function holdGpu(name: string): Promise<string> {
  const id = await cliRunId(
    env,
    '--cluster',
    redis.url,
    '--require',
    'gpu=1',
    '--sandbox',
    'off',
    '--name',
    name,
    '--cwd',
    submitterHome,
    '--',
    'sh',
    '-c',
    `until [ -e ${name}.go ]; do sleep 0.05; done`,
  )
  await waitFor(`task ${name} running`, async () => (await cluster.get(id)).state === 'running', FIRST_RUN_MS)
  return id
}

async function release(name: string, id: string): Promise<void> {
  writeFileSync(join(submitterHome, `${name}.go`), '')
  await cluster.wait(id, { timeoutMs: FIRST_RUN_MS })
}

/** Runs `check` while a task holds the gpu worker; releases it whatever the check found. */
async function whileHeld(name: string, check: (id: string) => Promise<void>): Promise<void> {
  const id = await holdGpu(name)
  try {
    await check(id)
  } finally {
    await release(name, id)
  }
}

describe('the cluster an operator can see', () => {
  test('tend workers lists the live workers: labels, queues, running and queued counts, last heartbeat', async () => {
    await waitFor('both workers announced', async () => (await listWorkers()).length === 2, FIRST_RUN_MS)
    const held = await holdGpu('held')
    // The gpu worker runs one at a time: the next gpu task waits on its queue.
    const waiting = await cluster.start({ command: ['true'], sandbox: 'off', require: { gpu: '1' } })
    try {
      await expectListed(held)
    } finally {
      await release('held', held)
      await cluster.wait(waiting.id, { timeoutMs: FIRST_RUN_MS })
    }
  })

  /** Both workers listed, the gpu one running `held` with one more task waiting on its queue. */
  async function expectListed(held: string): Promise<void> {
    const workers = await listWorkers()
    const byName = Object.fromEntries(workers.map((each) => [each.name, each]))
    expect(Object.keys(byName).sort()).toEqual(['gpu', 'plain'])
    expect(byName.gpu).toMatchObject({ labels: { gpu: '1', zone: 'eu' }, running: 1, runningIds: [held], queued: 1 })
    expect(byName.gpu!.queues).toContain('tend~gpu=1')
    expect(byName.plain).toMatchObject({ labels: {}, queues: ['tend'], running: 0, queued: 0 })
    for (const each of workers) expect(Date.now() - Date.parse(each.lastHeartbeat)).toBeLessThan(60_000)
    const unnamed = await runCli(['workers'], env)
    expect(unnamed.exitCode).toBe(2)
    expect(unnamed.stderr).toMatch(/--cluster/)
    // No token (it reads every record and output of the worker) is ever listed.
    expect(JSON.stringify(workers)).not.toMatch(/token/i)
    const text = await runCli(['workers', '--cluster', redis.url], env)
    expect(text.exitCode, text.stderr).toBe(0)
    expect(text.stdout).toMatch(/NAME\s+LABELS\s+QUEUES\s+RUNNING\s+QUEUED\s+HEARTBEAT/)
    expect(text.stdout).toMatch(/gpu\s+gpu=1,zone=eu\s+\S+\s+1\s+1\s+/)
  }

  test('ps --cluster shows the command and name of a running task, show gives its record', async () => {
    await whileHeld('shown', async (id) => {
      const listed = await runCli(['ps', '--cluster', redis.url], env)
      expect(listed.stdout).toMatch(new RegExp(`${id}\\s+running\\s+gpu\\s+\\S+\\s+shown`))
      const json = JSON.parse((await runCli(['ps', '--json', '--cluster', redis.url], env)).stdout) as Array<{ id: string; name: string; command: string[] }>
      expect(json.find((each) => each.id === id)).toMatchObject({ name: 'shown', command: ['sh', '-c', expect.stringContaining('shown.go')] })
      const shown = await runCli(['show', '--json', '--cluster', redis.url, id], env)
      expect(shown.exitCode, shown.stderr).toBe(0)
      expect(JSON.parse(shown.stdout)).toMatchObject({ id, name: 'shown', state: 'running', pid: expect.any(Number), cluster: { worker: 'gpu' } })
      const text = await runCli(['show', '--cluster', redis.url, id], env)
      expect(text.stdout).toContain('shown.go')
      expect(text.stdout).toMatch(/worker:\s+gpu/)
    })
  })

  test('an unnamed shell line shows as its line in ps --cluster before a worker has its record, and --json says shell', async () => {
    const started = await runCli(['run', '--cluster', redis.url, '--require', 'gpu=3', '--sandbox', 'off', '-c', 'make test'], env)
    expect(started.exitCode, started.stderr).toBe(0)
    const id = started.stdout.trim()
    try {
      const listed = await runCli(['ps', '--cluster', redis.url], env)
      expect(listed.stdout).toMatch(new RegExp(`${id}\\s+queued\\s+-\\s+\\S+\\s+make test\\n`))
      const json = JSON.parse((await runCli(['ps', '--json', '--cluster', redis.url], env)).stdout) as Array<{ id: string }>
      expect(json.find((each) => each.id === id)).toMatchObject({ name: null, command: ['sh', '-c', 'make test'], shell: true })
    } finally {
      await cluster.kill(id)
    }
  })

  test("tend status on a worker's daemon names its cluster, name, labels and running cluster tasks", async () => {
    await whileHeld('status', async (id) => {
      const status = await runCli(['status', '--json'], gpu.env)
      expect(status.exitCode, status.stderr).toBe(0)
      expect(JSON.parse(status.stdout).worker).toEqual({
        redis: redis.url,
        name: 'gpu',
        labels: { gpu: '1', zone: 'eu' },
        queue: 'tend',
        running: { count: 1, ids: [id] },
      })
      const text = await runCli(['status'], gpu.env)
      expect(text.stdout).toMatch(/cluster:\s+worker gpu \(gpu=1,zone=eu\) on redis:\/\/127\.0\.0\.1:\d+, queue tend; 1 cluster task running: /)
      expect(text.stdout).toContain(id)
    })
    // A worker that runs none of the cluster's tasks says so: a count of 0, no ids.
    const idle = await runCli(['status', '--json'], daemonEnv(plain.home))
    expect(JSON.parse(idle.stdout).worker).toMatchObject({ name: 'plain', running: { count: 0, ids: [] } })
  })

  test('--require that no live worker matches is queued, with a warning naming the labels on offer', async () => {
    const text = await runCli(['run', '--cluster', redis.url, '--require', 'gpu=2', '--sandbox', 'off', '--', 'true'], env)
    expect(text.exitCode, text.stderr).toBe(0)
    expect(text.stderr).toMatch(/no live worker has gpu=2/)
    expect(text.stderr).toMatch(/gpu: gpu=1,zone=eu/)
    expect(text.stderr).toMatch(/plain: no labels/)
    const id = text.stdout.trim()
    expect((await cluster.get(id)).state).toBe('queued')
    const json = await runCli(['run', '--json', '--cluster', redis.url, '--require', 'zone=us', '--sandbox', 'off', '--', 'true'], env)
    expect(json.exitCode, json.stderr).toBe(0)
    const started = JSON.parse(json.stdout) as { id: string; state: string; warnings: string[] }
    expect(started.state).toBe('queued')
    expect(started.warnings).toHaveLength(1)
    expect(started.warnings[0]).toMatch(/no live worker has zone=us.*gpu=1,zone=eu/)
    // A requirement a live worker meets: no warning.
    const met = await runCli(['run', '--json', '--cluster', redis.url, '--require', 'zone=eu', '--sandbox', 'off', '--', 'true'], env)
    expect(JSON.parse(met.stdout).warnings).toBeUndefined()
    await cluster.wait((JSON.parse(met.stdout) as { id: string }).id, { timeoutMs: FIRST_RUN_MS })
    for (const each of [id, started.id]) await cluster.kill(each)
  })

  test('kill --all on a cluster asks first: refused without a terminal or --yes, then kills every task of the owner', async () => {
    const mine = await Promise.all([1, 2].map(() => cluster.start({ command: ['sleep', '60'], sandbox: 'off', owner: 'alice' })))
    const theirs = await cluster.start({ command: ['sleep', '60'], sandbox: 'off', owner: 'bob' })
    await waitFor(
      'the tasks running',
      async () => (await Promise.all([...mine, theirs].map((each) => cluster.get(each.id)))).every((each) => each.state === 'running'),
      FIRST_RUN_MS,
    )
    const refused = await runCli(['kill', '--all', '--owner', 'alice', '--cluster', redis.url], env)
    expect(refused.exitCode).toBe(2)
    expect(refused.stderr).toMatch(/--yes/)
    expect(refused.stderr).toContain('2 task')
    for (const each of mine) expect((await cluster.get(each.id)).state).toBe('running')
    const killed = await runCli(['kill', '--all', '--owner', 'alice', '--yes', '--json', '--cluster', redis.url], env)
    expect(killed.exitCode, killed.stderr).toBe(0)
    expect((JSON.parse(killed.stdout) as Array<{ id: string }>).map((each) => each.id).sort()).toEqual(mine.map((each) => each.id).sort())
    for (const each of mine) expect((await cluster.get(each.id)).state).toBe('killed')
    expect((await cluster.get(theirs.id)).state).toBe('running')
    await cluster.kill(theirs.id)
    expect(existsSync(join(submitterHome, 'tend.sock'))).toBe(false)
  })
})
