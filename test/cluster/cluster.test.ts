import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ClusterClient } from '../../client/cluster/index.js'
import { runCli } from '../helpers/cli.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { settlesWithin, waitFor } from '../helpers/wait-for.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { createTempHome, daemonEnv, killEverythingOf, processesOfHome, startTestDaemon, stopAll, type TestDaemon } from '../helpers/test-daemon.js'

/*
 * Two worker daemons with homes of their own (two machines) on one real redis-server, and a
 * submitter that reaches only Redis.
 */

/** These workers take unsandboxed jobs too (most tests here run `off`): a worker takes only workspace and strict unless told. */
const ALLOW_EVERY_PROFILE = 'off,workspace,strict'

/**
 * A first job waits for a worker to join the cluster (after its socket answers it loads BullMQ and
 * opens its console) and for its task to start (a sandbox, on a loaded machine): seconds each under load.
 */
const FIRST_RUN_MS = 30_000

let redis: TestRedis
let plain: TestDaemon
let gpu: TestDaemon
let cluster: ClusterClient
/** The CLI's environment on the submitter's machine: a home of its own, where no daemon may start. */
let submitterHome: string
let submitterEnv: Record<string, string>

beforeAll(async () => {
  submitterHome = createTempHome()
  submitterEnv = daemonEnv(submitterHome)
  redis = await startRedis()
  plain = await startTestDaemon({
    env: { TEND_CLUSTER_REDIS: redis.url, TEND_CLUSTER_ALLOW_SANDBOX: ALLOW_EVERY_PROFILE, TEND_CLUSTER_NAME: 'plain', TEND_CLUSTER_CONCURRENCY: '8' },
  })
  gpu = await startTestDaemon({
    env: {
      TEND_CLUSTER_REDIS: redis.url,
      TEND_CLUSTER_ALLOW_SANDBOX: ALLOW_EVERY_PROFILE,
      TEND_CLUSTER_NAME: 'gpu',
      TEND_CLUSTER_LABELS: 'gpu=1,zone=eu',
      TEND_CLUSTER_CONCURRENCY: '8',
    },
  })
  cluster = new ClusterClient(redis.url)
})
afterAll(async () => {
  await cluster?.close()
  await plain?.stop()
  await gpu?.stop()
  await redis?.stop()
  rmSync(submitterHome, { recursive: true, force: true })
})

/**
 * An attempt of a task run in a folder both workers share (one machine here): it says it started,
 * then holds a lock on a file until `go` exists, so that an attempt that started while another
 * still ran finds the lock held and writes TWICE. `running` appears once it holds the lock.
 */
const EXCLUSIVE_ATTEMPT = `echo start >> attempts.log; flock -n held.lock sh -c 'touch running; until [ -e go ]; do sleep 0.05; done' || echo TWICE >> attempts.log`

/** Processes of a task, on whichever worker (its marker is in every process of it). */
function taskProcesses(id: string): number[] {
  return processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive)
}

/** Which worker's home holds the task's spool folder. */
function holder(id: string): string[] {
  return [plain, gpu].filter((worker) => existsSync(join(worker.home, 'spool', id))).map((worker) => (worker === plain ? 'plain' : 'gpu'))
}

describe('a cluster of two workers', () => {
  test('tasks spread over both workers, each run once under the same id, its final record answered to the submitter', async () => {
    const submitted = await Promise.all(
      Array.from({ length: 200 }, (_, n) => cluster.start({ command: ['sh', '-c', `echo task ${n}; sleep 0.05`], sandbox: 'off' })),
    )
    const finished = await Promise.all(submitted.map((task) => cluster.wait(task.id, { timeoutMs: 60_000 })))
    for (const [index, done] of finished.entries()) {
      expect(done.task, JSON.stringify(done)).toMatchObject({ id: submitted[index]!.id, state: 'exited', exitCode: 0, outputBytes: `task ${index}\n`.length })
      expect(holder(done.id), `${done.id} runs on exactly one worker`).toHaveLength(1)
      expect(done.worker).toBe(holder(done.id)[0])
    }
    const workers = new Set(finished.map((done) => done.worker))
    expect([...workers].sort()).toEqual(['gpu', 'plain'])
  })

  test('a task that requires labels runs only on a worker that has them all', async () => {
    const needsGpu = await Promise.all(Array.from({ length: 6 }, () => cluster.start({ command: ['true'], sandbox: 'off', require: { gpu: '1' } })))
    const needsBoth = await cluster.start({ command: ['true'], sandbox: 'off', require: { zone: 'eu', gpu: '1' } })
    for (const task of [...needsGpu, needsBoth]) {
      const done = await cluster.wait(task.id, { timeoutMs: 30_000 })
      expect(done).toMatchObject({ state: 'exited', worker: 'gpu' })
      expect(holder(task.id)).toEqual(['gpu'])
    }
    // Nobody has zone=us: it waits, queued.
    const nowhere = await cluster.start({ command: ['true'], sandbox: 'off', require: { zone: 'us' } })
    expect(await cluster.wait(nowhere.id, { timeoutMs: 1000 })).toMatchObject({ state: 'queued', worker: null })
  })

  test('the CLI submits with --cluster and --require, and wait and show answer from the queue', async () => {
    const env = submitterEnv
    const started = await runCli(['run', '--json', '--cluster', redis.url, '--require', 'gpu=1', '--', 'sh', '-c', 'exit 3'], env)
    expect(started.exitCode, started.stderr).toBe(0)
    const { id } = JSON.parse(started.stdout) as { id: string }
    const waited = await runCli(['wait', '--cluster', redis.url, id], env)
    expect(waited.exitCode).toBe(3)
    const shown = await runCli(['show', '--json', '--cluster', redis.url, id], env)
    expect(JSON.parse(shown.stdout)).toMatchObject({ id, state: 'exited', exitCode: 3 })
    // The submitter's machine started no daemon of its own.
    expect(existsSync(join(env.TEND_HOME!, 'tend.sock'))).toBe(false)
    const listed = JSON.parse((await runCli(['ps', '--all', '--json', '--cluster', redis.url], env)).stdout) as Array<{
      id: string
      state: string
      worker: string
    }>
    expect(listed.find((each) => each.id === id)).toMatchObject({ state: 'exited', worker: 'gpu' })
    const running = await cluster.start({ command: ['sleep', '1000'], sandbox: 'off' })
    await waitFor('the task to run', async () => (await cluster.get(running.id)).state === 'running')
    const unfinished = JSON.parse((await runCli(['ps', '--json', '--cluster', redis.url], env)).stdout) as Array<{ id: string; owner: string }>
    expect(unfinished.map((each) => each.id)).toContain(running.id)
    expect(unfinished.map((each) => each.id)).not.toContain(id)
    expect(unfinished.find((each) => each.id === running.id)).toMatchObject({ owner: 'operator' })
    const anothers = JSON.parse((await runCli(['ps', '--json', '--owner', 'alice', '--cluster', redis.url], env)).stdout) as unknown[]
    expect(anothers).toEqual([])
    await cluster.kill(running.id, { signal: 'SIGKILL' })
    const unknown = await runCli(['show', '--cluster', redis.url, 'zzzzzzzzzzzz'], env)
    expect(unknown.exitCode).toBe(1)
    expect(unknown.stderr).toContain('task not found')
    const noCluster = await runCli(['run', '--require', 'gpu=1', '--', 'true'], env)
    expect(noCluster.exitCode).toBe(2)
    expect(noCluster.stderr).toContain('--require needs --cluster')
  })

  test('run --retries: checked, refused without --cluster, and carried to the job; show --cluster says where and in which attempt it ran', async () => {
    const env = submitterEnv
    const alone = await runCli(['run', '--retries', '1', '--', 'true'], env)
    expect(alone.exitCode).toBe(2)
    expect(alone.stderr).toContain('--retries needs --cluster')
    const tooMany = await runCli(['run', '--cluster', redis.url, '--retries', '11', '--', 'true'], env)
    expect(tooMany.exitCode).toBe(2)
    expect(tooMany.stderr).toContain('expected a whole number from 0 to 10, got "11"')
    await expect(cluster.start({ command: ['true'], retries: -1 })).rejects.toMatchObject({
      code: 'TEND_ERR_VALIDATION',
      message: expect.stringContaining('retries'),
    })
    const started = await runCli(['run', '--json', '--cluster', redis.url, '--retries', '2', '--sandbox', 'off', '--', 'sh', '-c', 'echo retried'], env)
    expect(started.exitCode, started.stderr).toBe(0)
    const { id } = JSON.parse(started.stdout) as { id: string }
    await cluster.wait(id, { timeoutMs: 30_000 })
    const shown = JSON.parse((await runCli(['show', '--json', '--cluster', redis.url, id], env)).stdout) as {
      state: string
      cluster: { attempt: number; earlier: unknown[]; worker: string }
    }
    expect(shown).toMatchObject({ state: 'exited', cluster: { attempt: 1, earlier: [], worker: expect.stringMatching(/^(plain|gpu)$/) } })
    const text = await runCli(['show', '--cluster', redis.url, id], env)
    expect(text.stdout).toMatch(/^worker: +(plain|gpu)$/m)
  })

  test('a kill from the submitter stops the whole tree on the worker that runs it: no process is left', async () => {
    const submitted = await cluster.start({ command: 'sleep 1000 & sleep 1000 & wait', shell: true, sandbox: 'off', require: { gpu: '1' } })
    await waitFor('the task to run on a worker', async () => (await cluster.get(submitted.id)).state === 'running')
    expect(taskProcesses(submitted.id).length).toBeGreaterThan(0)
    const killed = await cluster.kill(submitted.id, { signal: 'SIGTERM', graceMs: 1000 })
    expect(killed).toMatchObject({ state: 'killed', worker: 'gpu' })
    expect(killed.task).toMatchObject({ id: submitted.id, state: 'killed', stoppedBy: 'operator', signal: 'SIGTERM' })
    expect(taskProcesses(submitted.id)).toEqual([])
    // Through the CLI too, by signal name.
    const env = submitterEnv
    const again = await cluster.start({ command: ['sleep', '1000'], sandbox: 'off' })
    await waitFor('the second task to run', async () => (await cluster.get(again.id)).state === 'running')
    const cli = await runCli(['kill', '--json', '--cluster', redis.url, '-s', 'KILL', again.id], env)
    expect(cli.exitCode, cli.stderr).toBe(0)
    expect(JSON.parse(cli.stdout)).toMatchObject({ id: again.id, state: 'killed', signal: 'SIGKILL' })
    expect(taskProcesses(again.id)).toEqual([])
  })

  test('a kill of a task no worker has taken takes it off the queue: it never runs', async () => {
    const waiting = await cluster.start({ command: ['touch', '/tmp/tend-cluster-never-ran'], sandbox: 'off', require: { zone: 'nowhere' } })
    expect(await cluster.kill(waiting.id)).toMatchObject({ state: 'killed', reason: 'killed before a worker took it' })
    expect(await cluster.get(waiting.id)).toMatchObject({ state: 'killed', worker: null })
    expect(holder(waiting.id)).toEqual([])
  })

  test('logs and logs --follow from the submitter read the output on the worker, never through Redis; run --wait streams it', async () => {
    const env = submitterEnv
    const lines = 'for i in 1 2 3 4 5; do echo line $i; sleep 0.1; done'
    const started = JSON.parse((await runCli(['run', '--json', '--cluster', redis.url, '--sandbox', 'off', '-c', lines], env)).stdout) as { id: string }
    const followed = await runCli(['logs', '--follow', '--cluster', redis.url, started.id], env)
    expect(followed.exitCode, followed.stderr).toBe(0)
    expect(followed.stdout).toBe('line 1\nline 2\nline 3\nline 4\nline 5\n')
    const read = await runCli(['logs', '--json', '--cluster', redis.url, started.id], env)
    expect(JSON.parse(read.stdout)).toMatchObject({ data: 'line 1\nline 2\nline 3\nline 4\nline 5\n', done: true, state: 'exited' })
    const streamed = await runCli(['run', '--wait', '--cluster', redis.url, '--sandbox', 'off', '-c', 'echo streamed; exit 4'], env)
    expect(streamed.exitCode).toBe(4)
    expect(streamed.stdout).toBe('streamed\n')
    // Redis holds the task's spec and state, never its bytes.
    const { Redis } = await import('ioredis')
    const redisClient = new Redis(redis.port, '127.0.0.1')
    try {
      const keys = await redisClient.keys('*')
      for (const key of keys) {
        const type = await redisClient.type(key)
        const text = type === 'hash' ? JSON.stringify(await redisClient.hgetall(key)) : type === 'string' ? ((await redisClient.get(key)) ?? '') : ''
        expect(text, key).not.toContain('line 3\n')
      }
    } finally {
      redisClient.disconnect()
    }
  })

  test('rm removes a finished cluster task everywhere (its spool on the worker, its job); a running one is refused', async () => {
    const env = submitterEnv
    const done = await cluster.start({ command: ['echo', 'to remove'], sandbox: 'off' })
    const finished = await cluster.wait(done.id, { timeoutMs: 30_000 })
    const where = finished.worker === 'plain' ? plain : gpu
    expect(existsSync(join(where.home, 'spool', done.id))).toBe(true)
    const running = await cluster.start({ command: ['sleep', '1000'], sandbox: 'off' })
    await waitFor('the task to run', async () => (await cluster.get(running.id)).state === 'running')
    const removed = await runCli(['rm', '--json', '--cluster', redis.url, done.id, running.id], env)
    expect(removed.exitCode).toBe(1)
    const answer = JSON.parse(removed.stdout) as {
      removed: Array<{ removed: string; freedBytes: number }>
      errors: Array<{ id: string; error: { code: string } }>
    }
    expect(answer.removed).toEqual([{ removed: done.id, freedBytes: expect.any(Number) }])
    expect(answer.removed[0]!.freedBytes).toBeGreaterThan(0)
    expect(answer.errors).toEqual([{ id: running.id, error: expect.objectContaining({ code: 'TEND_ERR_TASK_NOT_FINISHED' }) }])
    expect(existsSync(join(where.home, 'spool', done.id))).toBe(false)
    await expect(cluster.get(done.id)).rejects.toMatchObject({ code: 'TEND_ERR_TASK_NOT_FOUND' })
    await cluster.kill(running.id, { signal: 'SIGKILL' })
  })

  test('a job put on the queue by hand with a bad request fails, naming what is wrong; no task starts', async () => {
    const { Queue } = await import('bullmq')
    const { Redis } = await import('ioredis')
    const queue = new Queue('tend', { connection: { host: '127.0.0.1', port: redis.port } })
    const raw = new Redis(redis.port, '127.0.0.1')
    const id = 'badrequest01'
    try {
      await raw.hset('tend:tend:task-queues', { [id]: 'tend' })
      await queue.add(
        'task',
        { request: { command: 'rm -rf /', cwd: 'relative', bogus: 1 }, requirements: {}, submittedAt: new Date().toISOString() },
        { jobId: id },
      )
      const failed = await cluster.wait(id, { timeoutMs: 30_000 })
      expect(failed).toMatchObject({ state: 'failed', task: null })
      expect(failed.reason).toContain('not valid')
      expect(failed.reason).toContain('command must be array')
      expect(failed.reason).toContain('unknown field bogus')
      expect(holder(id)).toEqual([])
    } finally {
      raw.disconnect()
      await queue.close()
    }
  })

  test('a kill that comes while a worker is taking the job, before its task exists there, is not lost: the task is stopped as soon as it is admitted', async () => {
    const { Queue } = await import('bullmq')
    const { Redis } = await import('ioredis')
    const queue = new Queue('tend', { connection: { host: '127.0.0.1', port: redis.port } })
    const raw = new Redis(redis.port, '127.0.0.1')
    const id = 'killedearly1'
    try {
      // The kill is published first: no worker has the task yet, as in the moment between a worker
      // taking the job and admitting its task.
      await raw.publish('tend:tend:kill', JSON.stringify({ id, signal: 'SIGKILL', reason: 'early' }))
      await raw.hset('tend:tend:task-queues', { [id]: 'tend' })
      await queue.add(
        'task',
        { request: { command: ['sleep', '1000'], cwd: tmpdir(), sandbox: 'off' }, requirements: {}, submittedAt: new Date().toISOString() },
        { jobId: id },
      )
      const ended = await cluster.wait(id, { timeoutMs: 20_000 })
      expect(ended.task).toMatchObject({ id, state: 'killed', signal: 'SIGKILL', stoppedBy: 'operator', reason: expect.stringContaining('early') })
      expect(taskProcesses(id)).toEqual([])
    } finally {
      raw.disconnect()
      await queue.close()
    }
  })

  test("tend worker refuses a URL that is not Redis's, naming the setting and what it expects", async () => {
    const refused = await runCli(['worker', '--redis', 'http://127.0.0.1:6379'], submitterEnv)
    expect(refused.exitCode).toBe(2)
    expect(refused.stderr).toContain('TEND_CLUSTER_REDIS=http://127.0.0.1:6379')
    expect(refused.stderr).toContain('rediss?://')
    const labels = await runCli(['worker', '--redis', redis.url, '--labels', 'gpu'], submitterEnv)
    expect(labels.exitCode).toBe(2)
    expect(labels.stderr).toContain('TEND_CLUSTER_LABELS')
    const stall = await runCli(['worker', '--redis', redis.url, '--stall', 'soon'], submitterEnv)
    expect(stall.exitCode).toBe(2)
    expect(stall.stderr).toContain('TEND_CLUSTER_STALL')
  })

  test('Redis unreachable: a submission fails with a clear error at once', async () => {
    const nowhere = new ClusterClient('redis://127.0.0.1:9')
    try {
      const refused = settlesWithin('the submission to an unreachable Redis to fail', nowhere.start({ command: ['true'] }), 10_000)
      await expect(refused).rejects.toMatchObject({ code: 'TEND_ERR_CLUSTER_UNAVAILABLE', message: expect.stringContaining('redis://127.0.0.1:9') })
    } finally {
      await nowhere.close()
    }
  })
})

describe('faults', () => {
  test('a worker killed with -9 mid-task: the task ends lost within the stall interval, naming the worker, and never runs twice', async () => {
    const own = await startRedis()
    const workers = await Promise.all(
      ['first', 'second'].map((name) =>
        startTestDaemon({
          env: { TEND_CLUSTER_REDIS: own.url, TEND_CLUSTER_ALLOW_SANDBOX: ALLOW_EVERY_PROFILE, TEND_CLUSTER_NAME: name, TEND_CLUSTER_STALL: '2s' },
        }),
      ),
    )
    const client = new ClusterClient(own.url)
    let crashed: TestDaemon | undefined
    try {
      const submitted = await client.start({ command: ['sleep', '1000'], sandbox: 'off' })
      await waitFor('the task to run on a worker', async () => (await client.get(submitted.id)).state === 'running', FIRST_RUN_MS)
      const { worker } = await client.get(submitted.id)
      const victim = workers[worker === 'first' ? 0 : 1]!
      const survivor = workers[worker === 'first' ? 1 : 0]!
      crashed = victim
      await victim.crash()
      const lost = await waitFor(
        'the task to be lost',
        async () => {
          const now = await client.get(submitted.id)
          return now.state === 'lost' ? now : null
        },
        20_000,
      )
      expect(lost.reason).toContain(`worker ${worker} stopped answering`)
      expect(lost.task).toMatchObject({ id: submitted.id, state: 'lost', reason: lost.reason, exitCode: null })
      // The CLI waits on it as on a local task lost with its daemon: exit 125, saying why.
      const waited = await runCli(['wait', '--cluster', own.url, submitted.id], submitterEnv)
      expect(waited.exitCode).toBe(125)
      expect(waited.stderr).toContain(`lost: worker ${worker} stopped answering`)
      // The survivor never started it.
      expect(existsSync(join(survivor.home, 'spool', submitted.id))).toBe(false)
      expect(processesWithEnv(`TEND_TASK_ID=${submitted.id}`).filter(isAlive).length).toBeLessThanOrEqual(1)
    } finally {
      await client.close()
      // The crashed worker's task ran on under its keeper: it goes with everything of its home.
      if (crashed) await killEverythingOf(crashed.home)
      await stopAll(...workers, own)
    }
  })

  test('a worker killed with -9 mid-task, with --retries 1: the task runs again on the other worker as attempt 2, never beside attempt 1', async () => {
    const own = await startRedis()
    const workers = await Promise.all(
      ['first', 'second'].map((name) =>
        startTestDaemon({
          env: { TEND_CLUSTER_REDIS: own.url, TEND_CLUSTER_ALLOW_SANDBOX: ALLOW_EVERY_PROFILE, TEND_CLUSTER_NAME: name, TEND_CLUSTER_STALL: '2s' },
        }),
      ),
    )
    const client = new ClusterClient(own.url)
    const shared = mkdtempSync('/var/tmp/tend-cluster-retry-')
    let crashed: TestDaemon | undefined
    try {
      const submitted = await client.start({ command: EXCLUSIVE_ATTEMPT, shell: true, cwd: shared, retries: 1 })
      await waitFor('attempt 1 to run', () => existsSync(join(shared, 'running')), FIRST_RUN_MS)
      // The task's file can be there a moment before its worker reports it running.
      const first = await waitFor(
        'attempt 1 reported running',
        async () => {
          const now = await client.get(submitted.id)
          return now.state === 'running' ? now : null
        },
        FIRST_RUN_MS,
      )
      expect(first).toMatchObject({ state: 'running', attempt: 1, earlier: [] })
      const victim = workers[first.worker === 'first' ? 0 : 1]!
      const survivor = workers[first.worker === 'first' ? 1 : 0]!
      rmSync(join(shared, 'running'))
      crashed = victim
      await victim.crash()
      // The task ended with its worker's daemon: none of its processes is left on that worker.
      await waitFor(
        "attempt 1's processes to end with their daemon",
        () => processesWithEnv(`TEND_TASK_ID=${submitted.id}`).filter(isAlive).length === 0 || existsSync(join(shared, 'running')),
      )
      const second = await waitFor(
        'attempt 2 to run on the other worker',
        async () => {
          const now = await client.get(submitted.id)
          return now.attempt === 2 && now.state === 'running' && existsSync(join(shared, 'running')) ? now : null
        },
        20_000,
      )
      expect(second.worker).toBe(survivor === workers[0] ? 'first' : 'second')
      expect(second.earlier).toEqual([{ attempt: 1, worker: first.worker, reason: expect.stringContaining(`worker ${first.worker} stopped answering`) }])
      writeFileSync(join(shared, 'go'), '')
      const done = await client.wait(submitted.id, { timeoutMs: 30_000 })
      expect(done).toMatchObject({ state: 'exited', attempt: 2, worker: second.worker })
      expect(done.task).toMatchObject({ id: submitted.id, state: 'exited', exitCode: 0 })
      const shown = await runCli(['show', '--cluster', own.url, submitted.id], submitterEnv)
      expect(shown.stdout).toMatch(/^attempt: +2$/m)
      expect(shown.stdout).toMatch(new RegExp(`^attempt 1: +lost on ${first.worker}: worker ${first.worker} stopped answering`, 'm'))
      // Two starts, and the second found the lock free: the attempts never ran at once.
      expect(readFileSync(join(shared, 'attempts.log'), 'utf8')).toBe('start\nstart\n')
      expect(processesWithEnv(`TEND_TASK_ID=${submitted.id}`).filter(isAlive)).toEqual([])
      // Nothing of the crashed worker runs on: its task ended with it.
      expect(processesOfHome(victim.home)).toEqual([])
    } finally {
      await client.close()
      if (crashed) await killEverythingOf(crashed.home)
      await stopAll(...workers, own)
      rmSync(shared, { recursive: true, force: true })
    }
  })

  test('a worker frozen mid-task (SIGSTOP), with --retries 1: its keeper ends the task before the lock expires, and attempt 2 runs elsewhere, never beside it', async () => {
    const own = await startRedis()
    const workers = await Promise.all(
      ['north', 'south'].map((name) =>
        startTestDaemon({
          env: { TEND_CLUSTER_REDIS: own.url, TEND_CLUSTER_ALLOW_SANDBOX: ALLOW_EVERY_PROFILE, TEND_CLUSTER_NAME: name, TEND_CLUSTER_STALL: '2s' },
        }),
      ),
    )
    const client = new ClusterClient(own.url)
    const shared = mkdtempSync('/var/tmp/tend-cluster-frozen-')
    let frozen: TestDaemon | undefined
    try {
      const submitted = await client.start({ command: EXCLUSIVE_ATTEMPT, shell: true, cwd: shared, retries: 1 })
      await waitFor('attempt 1 to run', () => existsSync(join(shared, 'running')), FIRST_RUN_MS)
      // The task's file can be there a moment before its worker reports it running (and where).
      const first = await waitFor(
        'attempt 1 reported running',
        async () => {
          const now = await client.get(submitted.id)
          return now.state === 'running' ? now : null
        },
        FIRST_RUN_MS,
      )
      frozen = workers[first.worker === 'north' ? 0 : 1]!
      rmSync(join(shared, 'running'))
      // Frozen, not dead: its spawner's helper runs on, so only the lease can end the task.
      frozen.process.kill('SIGSTOP')
      const second = await waitFor(
        'attempt 2 to run on the other worker',
        async () => {
          const now = await client.get(submitted.id)
          return now.attempt === 2 && now.state === 'running' && existsSync(join(shared, 'running')) ? now : null
        },
        20_000,
      )
      expect(second.worker).not.toBe(first.worker)
      writeFileSync(join(shared, 'go'), '')
      expect(await client.wait(submitted.id, { timeoutMs: 30_000 })).toMatchObject({ state: 'exited', attempt: 2 })
      expect(readFileSync(join(shared, 'attempts.log'), 'utf8')).toBe('start\nstart\n')
      // Thawed, the frozen worker records its attempt lost to its lease, and runs nothing of it.
      frozen.process.kill('SIGCONT')
      const thawed = frozen
      frozen = undefined
      const recorded = await waitFor('the thawed worker to record attempt 1', async () => {
        const task = await thawed.client.get(submitted.id).catch(() => null)
        return task && task.state !== 'running' ? task : null
      })
      expect(recorded).toMatchObject({ state: 'lost', reason: expect.stringContaining('its lease ran out') })
      expect(processesWithEnv(`TEND_TASK_ID=${submitted.id}`).filter(isAlive)).toEqual([])
    } finally {
      frozen?.process.kill('SIGCONT')
      await client.close()
      await stopAll(...workers, own)
      rmSync(shared, { recursive: true, force: true })
    }
  })

  test('a worker that loses Redis mid-task stops a task with --retries before its lease can expire; the next attempt runs once Redis is back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tend-redis-'))
    const own = await startRedis({ persistIn: dir })
    const worker = await startTestDaemon({
      env: { TEND_CLUSTER_REDIS: own.url, TEND_CLUSTER_ALLOW_SANDBOX: ALLOW_EVERY_PROFILE, TEND_CLUSTER_NAME: 'fenced', TEND_CLUSTER_STALL: '2s' },
    })
    const client = new ClusterClient(own.url)
    const shared = mkdtempSync('/var/tmp/tend-cluster-fence-')
    try {
      const submitted = await client.start({ command: EXCLUSIVE_ATTEMPT, shell: true, cwd: shared, retries: 1 })
      await waitFor('attempt 1 to run', () => existsSync(join(shared, 'running')), FIRST_RUN_MS)
      rmSync(join(shared, 'running'))
      await client.close()
      await own.stop()
      // Without Redis the worker cannot confirm its lease: it stops the task before the lease could expire.
      // The worker stops it itself (killed, stoppedBy lease-expired); had it been too slow, the
      // task's keeper would have, at the lease the worker last wrote (lost: its lease ran out).
      const fenced = await waitFor(
        'attempt 1 to be stopped for its lease',
        async () => {
          const task = await worker.client.get(submitted.id)
          return task.state !== 'running' ? task : null
        },
        10_000,
      )
      if (fenced.state === 'killed') expect(fenced).toMatchObject({ stoppedBy: 'lease-expired', signal: 'SIGKILL' })
      else expect(fenced).toMatchObject({ state: 'lost', reason: expect.stringContaining('its lease ran out') })
      expect(processesWithEnv(`TEND_TASK_ID=${submitted.id}`).filter(isAlive)).toEqual([])
      await own.restart()
      const back = new ClusterClient(own.url)
      try {
        await waitFor('attempt 2 to run', () => existsSync(join(shared, 'running')), 20_000)
        writeFileSync(join(shared, 'go'), '')
        const done = await back.wait(submitted.id, { timeoutMs: 30_000 })
        expect(done).toMatchObject({
          state: 'exited',
          attempt: 2,
          worker: 'fenced',
          earlier: [{ attempt: 1, worker: 'fenced', reason: expect.stringContaining('lease') }],
        })
        expect(readFileSync(join(shared, 'attempts.log'), 'utf8')).toBe('start\nstart\n')
      } finally {
        await back.close()
      }
    } finally {
      await stopAll(worker, own)
      rmSync(dir, { recursive: true, force: true })
      rmSync(shared, { recursive: true, force: true })
    }
  })

  test('a task that required the labels of a worker killed with -9, the only one that had them, still ends lost within the stall interval', async () => {
    const own = await startRedis()
    const workers = await Promise.all([
      startTestDaemon({
        env: {
          TEND_CLUSTER_REDIS: own.url,
          TEND_CLUSTER_ALLOW_SANDBOX: ALLOW_EVERY_PROFILE,
          TEND_CLUSTER_NAME: 'only-gpu',
          TEND_CLUSTER_LABELS: 'gpu=1',
          TEND_CLUSTER_STALL: '2s',
        },
      }),
      startTestDaemon({
        env: { TEND_CLUSTER_REDIS: own.url, TEND_CLUSTER_ALLOW_SANDBOX: ALLOW_EVERY_PROFILE, TEND_CLUSTER_NAME: 'plain-one', TEND_CLUSTER_STALL: '2s' },
      }),
    ])
    const client = new ClusterClient(own.url)
    let crashed: TestDaemon | undefined
    try {
      const submitted = await client.start({ command: ['sleep', '1000'], require: { gpu: '1' } })
      await waitFor('the task to run on the gpu worker', async () => (await client.get(submitted.id)).state === 'running')
      crashed = workers[0]!
      await workers[0]!.crash()
      const lost = await waitFor(
        'the task to be lost',
        async () => {
          const now = await client.get(submitted.id)
          return now.state === 'lost' ? now : null
        },
        20_000,
      )
      expect(lost.reason).toContain('worker only-gpu stopped answering')
      expect(existsSync(join(workers[1]!.home, 'spool', submitted.id))).toBe(false)
    } finally {
      await client.close()
      if (crashed) await killEverythingOf(crashed.home)
      await stopAll(...workers, own)
    }
  })

  test('a worker whose Redis is away serves its own socket, stops cleanly, and joins the cluster when Redis comes', async () => {
    const own = await startRedis()
    await own.stop()
    const worker = await startTestDaemon({
      env: { TEND_CLUSTER_REDIS: own.url, TEND_CLUSTER_ALLOW_SANDBOX: ALLOW_EVERY_PROFILE, TEND_CLUSTER_NAME: 'patient' },
    })
    const client = new ClusterClient(own.url)
    try {
      const local = await worker.client.wait((await worker.client.start({ command: ['echo', 'local'] })).id)
      expect(local).toMatchObject({ state: 'exited', exitCode: 0 })
      await own.restart()
      const remote = await client.start({ command: ['echo', 'remote'], sandbox: 'off' })
      expect(await client.wait(remote.id, { timeoutMs: 30_000 })).toMatchObject({ state: 'exited', worker: 'patient' })
    } finally {
      await client.close()
      await stopAll(worker, own)
    }
  })

  test('Redis stopped and restarted while tasks run: nothing is lost and every completion is published once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tend-redis-'))
    const own = await startRedis({ persistIn: dir })
    const workers = await Promise.all(
      ['one', 'two'].map((name) =>
        startTestDaemon({
          env: { TEND_CLUSTER_REDIS: own.url, TEND_CLUSTER_ALLOW_SANDBOX: ALLOW_EVERY_PROFILE, TEND_CLUSTER_NAME: name, TEND_CLUSTER_STALL: '2s' },
        }),
      ),
    )
    const client = new ClusterClient(own.url)
    try {
      const submitted = await Promise.all(
        Array.from({ length: 8 }, (_, n) => client.start({ command: ['sh', '-c', `sleep 1; echo done ${n}`], sandbox: 'off' })),
      )
      await waitFor('every task to be taken', async () =>
        (await Promise.all(submitted.map((task) => client.get(task.id)))).every((each) => each.worker !== null),
      )
      await client.close()
      await own.stop()
      // While Redis is away the tasks end on their workers.
      await waitFor(
        'every task to end on its worker',
        async () => {
          const ended = await Promise.all(
            workers.map(async (worker) => (await worker.client.list({ all: true })).filter((task) => task.state === 'exited').length),
          )
          return ended.reduce((sum, count) => sum + count, 0) === submitted.length
        },
        30_000,
      )
      await own.restart()
      const back = new ClusterClient(own.url)
      try {
        const finished = await Promise.all(submitted.map((task) => back.wait(task.id, { timeoutMs: 30_000 })))
        for (const [n, done] of finished.entries())
          expect(done.task, JSON.stringify(done)).toMatchObject({ state: 'exited', exitCode: 0, outputBytes: `done ${n}\n`.length })
        // Each ran once, on one worker.
        for (const task of submitted) expect(workers.filter((worker) => existsSync(join(worker.home, 'spool', task.id)))).toHaveLength(1)
        // Each completion is in the queue's event stream once.
        const { Redis } = await import('ioredis')
        const redisClient = new Redis(own.port, '127.0.0.1')
        try {
          const entries = (await redisClient.xrange('bull:tend:events', '-', '+')) as Array<[string, string[]]>
          const completed = entries
            .map(([, fields]) => fields)
            .filter((fields) => fields[1] === 'completed')
            .map((fields) => fields[fields.indexOf('jobId') + 1])
          for (const task of submitted)
            expect(
              completed.filter((id) => id === task.id),
              task.id,
            ).toHaveLength(1)
        } finally {
          redisClient.disconnect()
        }
      } finally {
        await back.close()
      }
    } finally {
      await stopAll(...workers, own)
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
