import { afterEach, describe, expect, test } from 'vitest'
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { TendClient, type SandboxProfile, type Task } from '../../client/index.js'
import { OwnerSession } from '../../tools/core/owner-session.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { createTempHome, daemonEnv, killEverythingOf, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * Tasks outlive the daemon: a crash (SIGKILL) or a restart leaves every running task running
 * under its keeper, and the next daemon supervises it again; a task that ended meanwhile is
 * recorded as it ended, and announced once.
 */

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

/** However a test ends, every process of the home (keepers' tasks too) and its folders are gone afterwards. */
function removeHomeAfterwards(home: string, ...more: string[]): void {
  cleanups.push(async () => {
    await killEverythingOf(home)
    rmSync(home, { recursive: true, force: true })
    for (const dir of more) rmSync(dir, { recursive: true, force: true })
  })
}

/** Processes of a task (its marker is in every process of it, inside a sandbox too). */
function taskProcesses(id: string): number[] {
  return processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive)
}

/** A writer of numbered lines, "0\n1\n2\n…", paced so that it lasts; its output shows any loss or repeat. */
const ROUNDS = Number(process.env.TEND_SURVIVE_ROUNDS ?? 20)

const COUNTER = 'i=0; while :; do echo $i; i=$((i+1)); if [ $((i % 500)) = 0 ]; then sleep 0.02; fi; done'

function assertCounterOutput(output: string, id: string): number {
  const lines = output.split('\n')
  const last = lines.pop()
  // The last line may be cut by the kill; every whole one is the next number.
  lines.forEach((line, index) => expect(line, `${id}: line ${index}`).toBe(String(index)))
  expect(last === '' || String(lines.length).startsWith(last!), `${id}: trailing ${JSON.stringify(last)}`).toBe(true)
  return lines.length
}

describe('a daemon killed with SIGKILL, 20 times', () => {
  test('running tasks keep running and are supervised again; endings in between are exact; kills leave nothing; each notice comes once', async () => {
    const home = createTempHome()
    const workspace = mkdtempSync('/var/tmp/tend-survive-')
    removeHomeAfterwards(home, workspace)
    let daemon: TestDaemon = await startTestDaemon({ home, env: { TEND_KILL_GRACE: '500ms' } })
    const profiles = (await daemon.client.status()).sandbox.profiles as SandboxProfile[]
    // The agent's notice path, across every restart (it never starts a daemon itself).
    const notices: string[] = []
    const session = new OwnerSession('agent', { home, autoStart: false }, (text) => {
      notices.push(text)
      return true
    })
    await session.open()
    cleanups.push(() => session.close())
    const start = (command: string, sandbox: SandboxProfile, extra: { timeoutMs?: number } = {}) =>
      daemon.client.start({ command, shell: true, cwd: workspace, sandbox, owner: 'agent', ...extra })

    const writers = await Promise.all(profiles.map((sandbox) => start(COUNTER, sandbox)))
    // Running on disk, not only in memory: a crash before its running record lands is a crash during its start.
    const runningOnDisk = (id: string) => waitFor(`task ${id} recorded running`, async () => (await readTask(home, id)).state === 'running')
    for (const writer of writers) await runningOnDisk(writer.id)
    const crash = async () => {
      await daemon.crash()
      daemon.client.close()
    }
    const restart = async () => {
      daemon = await startTestDaemon({ home, env: { TEND_KILL_GRACE: '500ms' } })
    }
    const expected = new Map<string, Partial<Task>>()
    for (let round = 0; round < ROUNDS; round++) {
      const roundStart = Date.now()
      // Something happens while no daemon runs, in turn: a task ends, is killed from outside, times out.
      const sandbox = profiles[round % profiles.length]!
      const kind = round % 3
      const task =
        kind === 0
          ? await start(`while [ ! -e ${workspace}/end-${round} ]; do sleep 0.01; done; exit ${round + 1}`, sandbox)
          : kind === 1
            ? await start('exec sleep 1000', sandbox)
            : await start('exec sleep 1000', sandbox, { timeoutMs: 300 })
      await runningOnDisk(task.id)
      await crash()
      if (kind === 0) {
        writeFileSync(join(workspace, `end-${round}`), '')
        await waitFor(`task ${task.id} to end while no daemon runs`, () => taskProcesses(task.id).length === 0)
        expected.set(task.id, { state: 'exited', exitCode: round + 1 })
      } else if (kind === 1) {
        await waitFor(`task ${task.id}'s processes`, () => taskProcesses(task.id).length > 0)
        if (sandbox === 'off') {
          for (const pid of taskProcesses(task.id)) process.kill(pid, 'SIGTERM')
          await waitFor(`task ${task.id} to end while no daemon runs`, () => taskProcesses(task.id).length === 0)
          expected.set(task.id, { state: 'killed', signal: 'SIGTERM' })
        } else {
          expected.set(task.id, { state: 'killed' })
        }
      } else {
        const deadline = Date.parse((await readTask(home, task.id)).startedAt!) + 300
        await waitFor(`task ${task.id}'s deadline to pass while no daemon runs`, () => Date.now() > deadline)
        expected.set(task.id, { state: 'timed_out' })
      }
      await restart()
      // Every writer is still running, and supervised: its record says running, its process lives.
      for (const writer of writers) {
        const current = await daemon.client.get(writer.id)
        expect(current.state, `round ${round}: ${writer.id} (${writer.sandbox}): ${current.reason}`).toBe('running')
        expect(isAlive(current.pid!)).toBe(true)
      }
      if (kind === 1 && sandbox !== 'off') await daemon.client.kill(task.id)
      const ended = await daemon.client.wait(task.id, { timeoutMs: 20_000 })
      expect(ended, `round ${round}: ${task.id} (${sandbox})`).toMatchObject(expected.get(task.id)!)
      expect(taskProcesses(task.id)).toEqual([])
      if (process.env.TEND_TEST_TIMING) console.log(`round ${round} (${kind}, ${sandbox}): ${Date.now() - roundStart} ms`)
    }
    // The writers' output is whole: every number once, in order, across 20 crashes.
    for (const writer of writers) {
      // KILL, not TERM: a shell TERMed after its `sleep` may print "Terminated" after the last number.
      const killed = await daemon.client.kill(writer.id, { signal: 'SIGKILL' })
      expect(killed.state).toBe('killed')
      expect(taskProcesses(writer.id)).toEqual([])
      expect(assertCounterOutput(readFileSync(join(writer.spool, 'output.log'), 'utf8'), writer.id)).toBeGreaterThan(1000)
    }
    // One notice per task that ended without the agent looking, never two.
    const endedIds = [...expected.keys(), ...writers.map((writer) => writer.id)]
    await waitFor(
      `a notice for every task that ended (missing: ${endedIds.filter((id) => !notices.some((text) => text.includes(id))).join(' ')}; got ${notices.length})`,
      () => endedIds.every((id) => notices.some((text) => text.includes(id))),
      20_000,
    )
    for (const id of [...expected.keys(), ...writers.map((writer) => writer.id)])
      expect(
        notices.filter((text) => text.includes(id)),
        id,
      ).toHaveLength(1)
    await daemon.stop()
  }, 600_000)
})

async function readTask(home: string, id: string): Promise<Task> {
  return JSON.parse(readFileSync(join(home, 'spool', id, 'task.json'), 'utf8')) as Task
}

describe('limits that came due while no daemon ran', () => {
  test('an output cap passed meanwhile stops the task as soon as the next daemon starts, and output.log is cut back to it', async () => {
    const home = createTempHome()
    const workspace = mkdtempSync('/var/tmp/tend-cap-')
    removeHomeAfterwards(home, workspace)
    // The periodic check would catch it in a minute: only the start-up check can pass this test.
    const env = { TEND_KILL_GRACE: '500ms', TEND_OUTPUT_CHECK_INTERVAL: '60s' }
    let daemon = await startTestDaemon({ home, env })
    const task = await daemon.client.start({
      command: `while [ ! -e go ]; do sleep 0.01; done; head -c 100000 /dev/zero; exec sleep 1000`,
      shell: true,
      cwd: workspace,
      maxOutputBytes: 10_000,
    })
    await waitFor('the task recorded running', async () => (await readTask(home, task.id)).state === 'running')
    await daemon.crash()
    daemon.client.close()
    writeFileSync(join(workspace, 'go'), '')
    await waitFor('the output to pass its cap while no daemon runs', () => statSync(join(task.spool, 'output.log')).size >= 100_000)
    daemon = await startTestDaemon({ home, env })
    const ended = await daemon.client.wait(task.id, { timeoutMs: 10_000 })
    expect(ended).toMatchObject({ state: 'killed', outputBytes: 10_000 })
    expect(ended.reason).toContain('output cap')
    expect(statSync(join(task.spool, 'output.log')).size).toBe(10_000)
    expect(taskProcesses(task.id)).toEqual([])
    await daemon.stop()
  })
})

describe('a daemon that dies in the middle of a kill', () => {
  test('a sandbox monitor held (SIGSTOP) by the interrupted kill goes on under the next daemon, whose kill then works', async (context) => {
    const home = createTempHome()
    const workspace = mkdtempSync('/var/tmp/tend-held-')
    removeHomeAfterwards(home, workspace)
    let daemon = await startTestDaemon({ home, env: { TEND_KILL_GRACE: '500ms' } })
    const status = await daemon.client.status()
    expect(status.sandbox.profiles, `workspace is not available: ${status.sandbox.missing.workspace}`).toContain('workspace')
    const task = await daemon.client.start({
      command: 'i=0; while :; do echo $i; i=$((i+1)); sleep 0.01; done',
      shell: true,
      cwd: workspace,
      sandbox: 'workspace',
    })
    const running = await waitFor('the task to run', async () => {
      const current = await daemon.client.get(task.id)
      return current.state === 'running' && current.pid !== null ? current : null
    })
    // What a kill does first to a sandbox (kill-tree.ts): it holds bubblewrap's monitor. The daemon dies right then.
    process.kill(running.pid!, 'SIGSTOP')
    await waitFor('the monitor to be stopped', () => readFileSync(`/proc/${running.pid}/stat`, 'utf8').split(') ')[1]!.startsWith('T'))
    await daemon.crash()
    daemon.client.close()
    daemon = await startTestDaemon({ home, env: { TEND_KILL_GRACE: '500ms' } })
    expect(await daemon.client.get(task.id)).toMatchObject({ state: 'running', pid: running.pid })
    await waitFor('the monitor to go on', () => !readFileSync(`/proc/${running.pid}/stat`, 'utf8').split(') ')[1]!.startsWith('T'))
    const killed = await daemon.client.kill(task.id)
    expect(killed.state).toBe('killed')
    expect(taskProcesses(task.id)).toEqual([])
    await daemon.stop()
  })
})

describe('tend restart', () => {
  test('under load (50 running tasks): no task stops, and reads and waits in flight carry on', async () => {
    const home = createTempHome()
    const workspace = mkdtempSync('/var/tmp/tend-restart-')
    removeHomeAfterwards(home, workspace)
    const client = new TendClient({ home, env: daemonEnv(home, { TEND_CONCURRENCY: '64', TEND_PER_OWNER_CONCURRENCY: '64' }) })
    cleanups.push(() => client.close())
    const tasks = await Promise.all(
      Array.from({ length: 50 }, (_, index) =>
        client.start({ command: `echo started-${index}; exec sleep 1000`, shell: true, cwd: workspace, sandbox: index % 2 ? 'workspace' : 'off' }),
      ),
    )
    await waitFor('all 50 to run', async () => (await client.list()).filter((task) => task.state === 'running').length === 50, 30_000)
    const pids = new Map((await client.list()).map((task) => [task.id, task.pid!]))
    // In flight across the restart: long-polls on output and waits.
    const reads = tasks.slice(0, 10).map((task) => client.read(task.id, { from: 1_000_000, waitMs: 20_000 }))
    const waits = tasks.slice(10, 20).map((task) => client.wait(task.id, { timeoutMs: 20_000 }))
    const { previousPid, pid } = await client.restartDaemon()
    expect(pid).not.toBe(previousPid)
    const settled = await Promise.allSettled([...reads, ...waits])
    expect(settled.filter((result) => result.status === 'rejected').map((result) => String((result as PromiseRejectedResult).reason))).toEqual([])
    for (const task of await client.list()) {
      expect(task.state).toBe('running')
      expect(task.pid).toBe(pids.get(task.id))
      expect(isAlive(task.pid!)).toBe(true)
    }
    await Promise.all(tasks.map((task) => client.kill(task.id, { graceMs: 0 })))
    for (const task of tasks) expect(taskProcesses(task.id)).toEqual([])
    expect((await client.stopDaemon()).stopped).toBe(true)
  }, 120_000)

  test('tend stop --keep-tasks leaves tasks for the next daemon; plain tend stop still stops them', async () => {
    const home = createTempHome()
    removeHomeAfterwards(home)
    const first = await startTestDaemon({ home })
    const kept = await first.client.start({ command: ['sleep', '1000'] })
    await waitFor('the task to run', async () => (await first.client.get(kept.id)).state === 'running')
    await first.client.stopDaemon({ keepTasks: true })
    await waitFor('the first daemon to exit', () => first.process.exitCode !== null)
    expect(taskProcesses(kept.id).length).toBeGreaterThan(0)
    const second = await startTestDaemon({ home })
    expect(await second.client.get(kept.id)).toMatchObject({ state: 'running' })
    await second.client.stopDaemon()
    await waitFor('the second daemon to exit', () => second.process.exitCode !== null)
    expect(taskProcesses(kept.id)).toEqual([])
    expect((await readTask(home, kept.id)).state).toBe('killed')
  })
})
