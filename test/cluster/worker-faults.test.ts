import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { ClusterClient } from '../../client/cluster/index.js'
import { killTree } from '../../daemon/spawn/kill-tree.js'
import { runCli } from '../helpers/cli.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait-for.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { createTempHome, daemonEnv, killEverythingOf, startTestDaemon, stopAll, TEND_BIN, type TestDaemon } from '../helpers/test-daemon.js'

/*
 * Worker loss and return (docs/reliability.md): two workers with homes of their own on one
 * machine and one real redis-server, as two machines would be, except that they share /proc and
 * the cgroup tree. A worker that comes back after it was frozen or killed answers for what it ran,
 * and never touches what another worker runs.
 */

const ALLOW_EVERY_PROFILE = 'off,workspace,strict'

/**
 * A first job waits for a worker to join the cluster (after its socket answers it loads BullMQ and
 * opens its console) and for its task to start (a sandbox, on a loaded machine): seconds each under load.
 */
const FIRST_RUN_MS = 30_000

let submitterHome: string
let submitterEnv: Record<string, string>

beforeAll(() => {
  submitterHome = createTempHome()
  submitterEnv = daemonEnv(submitterHome)
})
afterAll(() => {
  rmSync(submitterHome, { recursive: true, force: true })
})

/** Two workers on a Redis of their own, stall interval 2 s. */
async function twoWorkers(names: [string, string]): Promise<{ redis: TestRedis; workers: TestDaemon[]; client: ClusterClient }> {
  const redis = await startRedis()
  const workers = await Promise.all(names.map((name) => startTestDaemon({ env: workerEnv(redis, name) })))
  return { redis, workers, client: new ClusterClient(redis.url) }
}

function workerEnv(redis: TestRedis, name: string): Record<string, string> {
  return { TEND_CLUSTER_REDIS: redis.url, TEND_CLUSTER_ALLOW_SANDBOX: ALLOW_EVERY_PROFILE, TEND_CLUSTER_NAME: name, TEND_CLUSTER_STALL: '2s' }
}

/** Live processes of the task, on any worker (every process of a task carries its id). */
function taskProcesses(id: string): number[] {
  return processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive)
}

/**
 * An attempt that says it started, then holds `running` until `go` exists, then exits 0. Each
 * attempt appends to attempts.log; a second one that finds the lock held writes TWICE.
 */
const EXCLUSIVE_ATTEMPT = `echo start >> attempts.log; flock -n held.lock sh -c 'touch running; until [ -e go ]; do sleep 0.05; done' || echo TWICE >> attempts.log`

/**
 * The attempt's processes that live as long as it does: its two shells and flock. Not the children
 * of its polling shell: each `sleep`, and the fork for the next one, which reads as that shell until
 * it execs (under load, for milliseconds), and both end within the loop's 50 ms. Nor one exiting
 * as it is looked at (its command line reads empty).
 */
function lastingProcesses(id: string): number[] {
  return taskProcesses(id).filter((pid) => commandOf(pid) !== '' && !commandOf(parentOf(pid)).startsWith('sh -c touch running;'))
}

describe('worker loss and return', () => {
  for (const sandbox of ['workspace', 'off'] as const) {
    test(`a worker frozen past the stall interval, then thawed while the retry runs elsewhere (${sandbox}): its lease stop kills only its own attempt; the retry runs to its end`, async () => {
      const { redis, workers, client } = await twoWorkers(['north', 'south'])
      const shared = mkdtempSync('/var/tmp/tend-cluster-thawed-')
      let frozen: TestDaemon | undefined
      try {
        const submitted = await client.start({ command: EXCLUSIVE_ATTEMPT, shell: true, cwd: shared, retries: 1, sandbox })
        await waitFor('attempt 1 to run', () => existsSync(join(shared, 'running')), FIRST_RUN_MS)
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
        const retryProcesses = lastingProcesses(submitted.id)
        expect(retryProcesses.length).toBeGreaterThan(0)
        // Thawed while attempt 2 runs: its lease watch and its keeper's report both come due at once.
        frozen.process.kill('SIGCONT')
        const thawed = frozen
        frozen = undefined
        const recorded = await waitFor(
          'the thawed worker to record attempt 1',
          async () => {
            const task = await thawed.client.get(submitted.id).catch(() => null)
            return task && task.state !== 'running' ? task : null
          },
          20_000,
        )
        expect(recorded.state).toBe('lost')
        // Recorded only once its stop (if any) is over: the retry's processes still run, every one.
        expect(retryProcesses.filter(isAlive)).toEqual(retryProcesses)
        expect(await client.get(submitted.id)).toMatchObject({ state: 'running', attempt: 2, worker: second.worker })
        writeFileSync(join(shared, 'go'), '')
        const done = await client.wait(submitted.id, { timeoutMs: 30_000 })
        expect(done).toMatchObject({ state: 'exited', attempt: 2, worker: second.worker })
        expect(done.task).toMatchObject({ state: 'exited', exitCode: 0, stoppedBy: null })
        expect(readFileSync(join(shared, 'attempts.log'), 'utf8')).toBe('start\nstart\n')
      } finally {
        frozen?.process.kill('SIGCONT')
        await client.close()
        rmSync(shared, { recursive: true, force: true })
        await stopAll(...workers, redis)
      }
    })
  }

  for (const sandbox of ['workspace', 'off'] as const) {
    test(`a worker killed with -9 and restarted while the retry runs elsewhere (${sandbox}): its recovery stops only what it ran; the retry runs to its end`, async () => {
      const { redis, workers, client } = await twoWorkers(['near', 'far'])
      const shared = mkdtempSync('/var/tmp/tend-cluster-restarted-')
      try {
        const submitted = await client.start({ command: EXCLUSIVE_ATTEMPT, shell: true, cwd: shared, retries: 1, sandbox })
        const first = await waitFor(
          'attempt 1 reported running',
          async () => {
            const now = await client.get(submitted.id)
            return now.state === 'running' && existsSync(join(shared, 'running')) ? now : null
          },
          FIRST_RUN_MS,
        )
        const index = first.worker === 'near' ? 0 : 1
        const victim = workers[index]!
        rmSync(join(shared, 'running'))
        await victim.crash()
        const second = await waitFor(
          'attempt 2 to run on the other worker',
          async () => {
            const now = await client.get(submitted.id)
            return now.attempt === 2 && now.state === 'running' && existsSync(join(shared, 'running')) ? now : null
          },
          20_000,
        )
        const retryProcesses = lastingProcesses(submitted.id)
        expect(retryProcesses.length).toBeGreaterThan(0)
        // Back on its home while attempt 2 runs on the other worker: it recovers its own attempt 1.
        workers[index] = await startTestDaemon({ home: victim.home, env: workerEnv(redis, first.worker!) })
        expect(await workers[index]!.client.get(submitted.id)).toMatchObject({ state: 'lost' })
        expect(retryProcesses.filter(isAlive)).toEqual(retryProcesses)
        writeFileSync(join(shared, 'go'), '')
        const done = await client.wait(submitted.id, { timeoutMs: 30_000 })
        expect(done).toMatchObject({ state: 'exited', attempt: 2, worker: second.worker })
        expect(done.task).toMatchObject({ state: 'exited', exitCode: 0, stoppedBy: null })
        expect(readFileSync(join(shared, 'attempts.log'), 'utf8')).toBe('start\nstart\n')
      } finally {
        await client.close()
        rmSync(shared, { recursive: true, force: true })
        await stopAll(...workers, redis)
      }
    })
  }

  for (const how of ['killed', 'frozen'] as const) {
    test(`a worker ${how} without retries, back after its task exited 6: the job judged lost gets the task's real end, and wait --cluster exits 6`, async () => {
      const { redis, workers, client } = await twoWorkers(['east', 'west'])
      const shared = mkdtempSync('/var/tmp/tend-cluster-return-')
      const restarted: TestDaemon[] = []
      let crashedHome: string | undefined
      let frozen: TestDaemon | undefined
      try {
        const submitted = await client.start({
          command: 'touch running; until [ -e go ]; do sleep 0.05; done; exit 6',
          shell: true,
          cwd: shared,
          sandbox: 'off',
        })
        const first = await waitFor(
          'the task reported running',
          async () => {
            const now = await client.get(submitted.id)
            return now.state === 'running' && existsSync(join(shared, 'running')) ? now : null
          },
          FIRST_RUN_MS,
        )
        const index = first.worker === 'east' ? 0 : 1
        const victim = workers[index]!
        if (how === 'killed') {
          crashedHome = victim.home
          await victim.crash()
        } else {
          frozen = victim
          victim.process.kill('SIGSTOP')
        }
        const lost = await waitFor(
          'the job to be judged lost',
          async () => {
            const now = await client.get(submitted.id)
            return now.state === 'lost' ? now : null
          },
          30_000,
        )
        expect(lost.reason).toContain(`worker ${first.worker} stopped answering`)
        // The task ran on under its keeper, and ends now, while its worker is away.
        writeFileSync(join(shared, 'go'), '')
        await waitFor('the task to end', () => taskProcesses(submitted.id).length === 0)
        if (how === 'killed') {
          const back = await startTestDaemon({ home: victim.home, env: workerEnv(redis, first.worker!) })
          restarted.push(back)
          crashedHome = undefined
          workers[index] = back
          expect(await back.client.get(submitted.id)).toMatchObject({ state: 'exited', exitCode: 6 })
        } else {
          victim.process.kill('SIGCONT')
          frozen = undefined
        }
        const answered = await waitFor(
          'the job to get the real end',
          async () => {
            const now = await client.get(submitted.id)
            return now.state !== 'lost' ? now : null
          },
          30_000,
        )
        expect(answered).toMatchObject({ state: 'exited', worker: first.worker, attempt: 1 })
        expect(answered.task).toMatchObject({ id: submitted.id, state: 'exited', exitCode: 6 })
        const waited = await runCli(['wait', '--cluster', redis.url, submitted.id], submitterEnv)
        expect(waited.exitCode, waited.stderr).toBe(6)
      } finally {
        frozen?.process.kill('SIGCONT')
        await client.close()
        if (crashedHome) await killEverythingOf(crashedHome)
        rmSync(shared, { recursive: true, force: true })
        await stopAll(...workers, redis)
      }
    })
  }

  test('a job whose progress names a later attempt stays as it is: the worker that ran a superseded attempt, back later, never answers over it', async () => {
    const { redis, workers, client } = await twoWorkers(['up', 'down'])
    const shared = mkdtempSync('/var/tmp/tend-cluster-superseded-')
    const { Redis } = await import('ioredis')
    const raw = new Redis(redis.port, '127.0.0.1')
    let frozen: TestDaemon | undefined
    try {
      const submitted = await client.start({ command: 'touch running; until [ -e go ]; do sleep 0.05; done; exit 6', shell: true, cwd: shared, sandbox: 'off' })
      const first = await waitFor(
        'the task reported running',
        async () => {
          const now = await client.get(submitted.id)
          return now.state === 'running' && existsSync(join(shared, 'running')) ? now : null
        },
        FIRST_RUN_MS,
      )
      frozen = workers[first.worker === 'up' ? 0 : 1]!
      frozen.process.kill('SIGSTOP')
      await waitFor('the job to be judged lost', async () => (await client.get(submitted.id)).state === 'lost', 30_000)
      // As a retry leaves it: its report names attempt 2 on the other worker (it ran, and was lost too).
      const other = first.worker === 'up' ? 'down' : 'up'
      const progress = JSON.parse((await raw.hget(`bull:tend:${submitted.id}`, 'progress'))!) as Record<string, unknown>
      await raw.hset(
        `bull:tend:${submitted.id}`,
        'progress',
        JSON.stringify({ ...progress, worker: other, attempt: 2, earlier: [{ attempt: 1, worker: first.worker, reason: 'lost' }] }),
      )
      writeFileSync(join(shared, 'go'), '')
      await waitFor('the task to end', () => taskProcesses(submitted.id).length === 0)
      const thawed = frozen
      frozen.process.kill('SIGCONT')
      frozen = undefined
      await waitFor('the thawed worker to record its end', async () => (await thawed.client.get(submitted.id)).state === 'exited')
      // It looks at the job for a few stall intervals: long enough to have answered over the retry, were it to.
      const probe = await client.start({ command: ['true'], sandbox: 'off' })
      await client.wait(probe.id, { timeoutMs: 30_000 })
      expect(await client.get(submitted.id)).toMatchObject({ state: 'lost', attempt: 2, worker: other })
      expect(await raw.zscore('bull:tend:failed', submitted.id)).not.toBeNull()
    } finally {
      frozen?.process.kill('SIGCONT')
      raw.disconnect()
      await client.close()
      rmSync(shared, { recursive: true, force: true })
      await stopAll(...workers, redis)
    }
  })

  test('logs -f --cluster when the worker dies: it follows the retry to its next worker; without one it says where the task was lost and exits 125; wait and show answer too', async () => {
    const { redis, workers, client } = await twoWorkers(['left', 'right'])
    const crashed: string[] = []
    const cwd = mkdtempSync('/var/tmp/tend-cluster-follow-')
    // A failure here is reported as it is, not as the leftovers its cleanup then finds (and kills).
    let passed = false
    try {
      // With a retry: the follow goes on with attempt 2 on the other worker.
      const retried = await client.start({
        command: 'echo attempt $(cat attempts 2>/dev/null | wc -l); echo x >> attempts; until [ -e go ]; do sleep 0.05; done; echo done',
        shell: true,
        cwd,
        retries: 1,
      })
      const follower = followLogs(redis.url, retried.id)
      await waitFor('the follower to print attempt 1', () => follower.stdout().includes('attempt 0\n'), 20_000)
      const first = await client.get(retried.id)
      const index = first.worker === 'left' ? 0 : 1
      const victim = workers[index]!
      await victim.crash()
      await waitFor(
        'attempt 2 to run',
        async () => {
          const now = await client.get(retried.id)
          return now.attempt === 2 && now.state === 'running'
        },
        20_000,
      )
      await waitFor('the follower to print attempt 2', () => follower.stdout().includes('attempt 1\n'), 20_000)
      writeFileSync(join(cwd, 'go'), '')
      const followed = await follower.done
      expect(followed.stderr).not.toContain('ECONNREFUSED')
      expect(followed.stderr).toContain(`attempt 1 was lost on worker ${first.worker}`)
      expect(followed.stdout, followed.stderr).toBe('attempt 0\nattempt 1\ndone\n')
      expect(followed.exitCode, followed.stderr).toBe(0)

      // Without one: the follow ends saying where the task was lost, exit 125 (as wait for a lost task).
      workers[index] = await startTestDaemon({ home: victim.home, env: workerEnv(redis, first.worker!) })
      const single = await client.start({ command: 'echo only; sleep 1000', shell: true, sandbox: 'off' })
      const only = followLogs(redis.url, single.id)
      await waitFor('the follower to print', () => only.stdout().includes('only\n'), 20_000)
      const holder = (await client.get(single.id)).worker!
      const gone = workers.find((each) => each.env.TEND_CLUSTER_NAME === holder)!
      crashed.push(gone.home)
      await gone.crash()
      const ended = await only.done
      expect(ended.stderr).not.toContain('ECONNREFUSED')
      expect(ended.stderr).toContain(`task ${single.id} was lost on worker ${holder} (attempt 1)`)
      expect(ended.exitCode).toBe(125)
      const shown = await runCli(['show', '--json', '--cluster', redis.url, single.id], submitterEnv)
      expect(shown.exitCode, shown.stderr).toBe(0)
      expect(JSON.parse(shown.stdout)).toMatchObject({ id: single.id, state: 'lost' })
      const waited = await runCli(['wait', '--cluster', redis.url, single.id], submitterEnv)
      expect(waited.exitCode).toBe(125)
      expect(waited.stderr).toContain(`lost: worker ${holder} stopped answering`)
      passed = true
    } finally {
      await client.close()
      rmSync(cwd, { recursive: true, force: true })
      for (const home of crashed) await killEverythingOf(home)
      await stopAll(...workers, redis).catch((error: unknown) => {
        if (passed) throw error
      })
    }
  })

  test('logs -f --cluster when the worker freezes: the follow does not wait on it, and ends saying where the task was lost (exit 125)', async () => {
    const { redis, workers, client } = await twoWorkers(['cold', 'warm'])
    let frozen: TestDaemon | undefined
    let only: ReturnType<typeof followLogs> | undefined
    try {
      const single = await client.start({ command: 'echo only; sleep 1000', shell: true, sandbox: 'off' })
      only = followLogs(redis.url, single.id)
      await waitFor('the follower to print', () => only!.stdout().includes('only\n'), 20_000)
      const holder = (await client.get(single.id)).worker!
      frozen = workers.find((each) => each.env.TEND_CLUSTER_NAME === holder)!
      frozen.process.kill('SIGSTOP')
      // Judged lost within the stall interval and the look at the worker (5 s): long before the read's own deadline.
      const ended = await waitFor('the follow to end', () => only!.result(), 30_000)
      expect(ended.stderr).toContain(`task ${single.id} was lost on worker ${holder} (attempt 1)`)
      expect(ended.exitCode).toBe(125)
      expect(ended.stdout).toBe('only\n')
    } finally {
      only?.kill()
      frozen?.process.kill('SIGCONT')
      await client.close()
      await stopAll(...workers, redis)
    }
  })
})

function commandOf(pid: number | null): string {
  try {
    return pid === null ? '' : readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ')
  } catch {
    return ''
  }
}

/** The pid's parent; null once it is gone. */
function parentOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
  } catch {
    return null
  }
}

describe('a daemon only ever signals what it started', () => {
  // A frozen daemon's task can end meanwhile and be reaped by its keeper; its pid may then be
  // another daemon's task (another attempt of the same cluster job, on the same machine).
  for (const wrapped of [false, true]) {
    for (const leader of ['another start time', "not the keeper's child"] as const) {
      test(`a stop whose leader pid belongs to another process now (${wrapped ? 'sandboxed' : 'off'}, ${leader}) signals neither that process nor its group`, async () => {
        // A group leader, as a task's leader is: its group would be signalled too.
        const other = spawn('sh', ['-c', 'sleep 1000 & wait'], { detached: true, stdio: 'ignore' })
        try {
          const pid = other.pid!
          await waitFor('the other process to start its child', () => processesInGroup(pid).length >= 2)
          const result = await killTree({
            taskId: 'aaaaaaaaaaaa',
            marker: 'TEND_TASK_RUN=aaaaaaaaaaaa.0000000000000000',
            pid,
            leader: leader === 'another start time' ? { pid, startTime: '1' } : null,
            signal: 'SIGTERM',
            graceMs: 200,
            // Its leader has exited (reaped by its keeper): the pid was free for another process.
            leaderExited: Promise.resolve(),
            wrapped,
            killWaitMs: 1000,
          })
          expect(result.signalled).toBe(false)
          expect(processesInGroup(pid).filter(isAlive)).toHaveLength(2)
          expect(isAlive(pid)).toBe(true)
        } finally {
          process.kill(-other.pid!, 'SIGKILL')
        }
      })
    }
  }
})

/** Live processes whose process group is `group`. */
function processesInGroup(group: number): number[] {
  return readdirSync('/proc')
    .map(Number)
    .filter((pid) => {
      if (!Number.isInteger(pid)) return false
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) === group
      } catch {
        return false
      }
    })
}

interface FollowResult {
  exitCode: number | null
  stdout: string
  stderr: string
}

/** `tend logs -f --cluster URL ID` from the submitter's machine, running in the background. */
function followLogs(url: string, id: string): { stdout: () => string; done: Promise<FollowResult>; result: () => FollowResult | null; kill: () => void } {
  const child = spawn(process.execPath, [TEND_BIN, 'logs', '-f', '--cluster', url, id], { env: submitterEnv, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  let result: FollowResult | null = null
  const done = new Promise<FollowResult>((resolve) =>
    child.once('close', (exitCode) => {
      result = { exitCode, stdout, stderr }
      resolve(result)
    }),
  )
  // A follow that never ended must not outlive its test.
  const kill = () => void (child.exitCode === null && child.signalCode === null && child.kill('SIGKILL'))
  return { stdout: () => stdout, done, result: () => result, kill }
}
