import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { TendClient, type Task } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { expectTendError } from '../helpers/daemon-per-file.js'
import { createTempHome, daemonEnv, killEverythingOf, startTestDaemon, stopKeepingHome, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * `--after`: a task stays queued until the tasks it waits for have ended, then starts if all
 * exited 0 (with `--after-any`: whatever they ended as), or ends failed naming the dependency that
 * did not. The wait is recorded (`after` in task.json) and survives a daemon restart.
 */

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

async function daemonWithWorkspace(): Promise<{
  daemon: () => TestDaemon
  restart: () => Promise<void>
  crash: () => Promise<void>
  home: string
  workspace: string
}> {
  const home = createTempHome()
  const workspace = mkdtempSync('/var/tmp/tend-after-')
  let daemon = await startTestDaemon({ home })
  cleanups.push(async () => {
    await daemon.stop().catch(() => undefined)
    await killEverythingOf(home)
    rmSync(home, { recursive: true, force: true })
    rmSync(workspace, { recursive: true, force: true })
  })
  return {
    daemon: () => daemon,
    home,
    workspace,
    crash: async () => {
      await daemon.crash()
      daemon.client.close()
    },
    restart: async () => {
      daemon = await startTestDaemon({ home })
    },
  }
}

/** A shell line that waits for `gate` to exist, then runs `then`. */
function gated(gate: string, then: string): string {
  return `while [ ! -e ${gate} ]; do sleep 0.02; done; ${then}`
}

function start(client: TendClient, workspace: string, line: string, extra: { name?: string; after?: string[]; afterAny?: boolean } = {}): Promise<Task> {
  return client.start({ command: line, shell: true, cwd: workspace, sandbox: 'off', ...extra })
}

describe('--after', () => {
  test('a chain a → b → c runs in order, each queued until the one before has exited 0; the CLI takes names and prefixes', async () => {
    const { daemon, home, workspace } = await daemonWithWorkspace()
    const { client } = daemon()
    const gate = join(workspace, 'gate')
    const a = await start(client, workspace, gated(gate, 'echo a'), { name: 'after-a' })
    const ranB = await runCli(
      ['--json', 'run', '--sandbox', 'off', '--cwd', workspace, '--name', 'after-b', '--after', 'after-a', '-c', 'echo b'],
      daemonEnv(home),
    )
    expect(ranB.exitCode, ranB.stderr).toBe(0)
    const b = JSON.parse(ranB.stdout) as Task
    expect(b.after).toEqual({ ids: [a.id], any: false })
    const ranC = await runCli(['run', '--sandbox', 'off', '--cwd', workspace, '--after', b.id.slice(0, 6), '-c', 'echo c'], daemonEnv(home))
    expect(ranC.exitCode, ranC.stderr).toBe(0)
    const c = await client.get(ranC.stdout.trim())
    expect(c.after).toEqual({ ids: [b.id], any: false })

    await waitFor(`task ${a.id} running`, async () => (await client.get(a.id)).state === 'running')
    const shown = await runCli(['show', 'after-b'], daemonEnv(home))
    expect(shown.stdout).toMatch(new RegExp(`after: +${a.id} \\(starts if all exit 0\\)`))
    expect((await client.get(b.id)).state).toBe('queued')
    expect((await client.get(c.id)).state).toBe('queued')
    writeFileSync(gate, '')
    const endedC = await client.wait(c.id)
    const [endedA, endedB] = [await client.get(a.id), await client.get(b.id)]
    expect([endedA.state, endedB.state, endedC.state]).toEqual(['exited', 'exited', 'exited'])
    expect(Date.parse(endedB.startedAt!)).toBeGreaterThanOrEqual(Date.parse(endedA.endedAt!))
    expect(Date.parse(endedC.startedAt!)).toBeGreaterThanOrEqual(Date.parse(endedB.endedAt!))
    expect((await client.read(c.id)).data).toBe('c\n')
  })

  test('a dependency that exits 2 fails the task that waits for it, and the failure goes down the chain', async () => {
    const { daemon, workspace } = await daemonWithWorkspace()
    const { client } = daemon()
    const gate = join(workspace, 'gate')
    const a = await start(client, workspace, gated(gate, 'exit 2'))
    const b = await start(client, workspace, 'echo b', { after: [a.id] })
    const c = await start(client, workspace, 'echo c', { after: [b.id] })
    const any = await start(client, workspace, 'echo any', { after: [a.id], afterAny: true })
    writeFileSync(gate, '')
    const failedC = await client.wait(c.id)
    const failedB = await client.get(b.id)
    expect(failedB).toMatchObject({ state: 'failed', reason: `dependency ${a.id} exited 2`, startedAt: null })
    expect(failedC).toMatchObject({ state: 'failed', reason: `dependency ${b.id} failed`, startedAt: null })
    const ranAny = await client.wait(any.id)
    expect(ranAny.state).toBe('exited')
    expect((await client.read(any.id)).data).toBe('any\n')
  })

  test('a killed dependency is named so; a dependency that already ended is judged at once; a waiting task can be killed', async () => {
    const { daemon, workspace } = await daemonWithWorkspace()
    const { client } = daemon()
    const sleeper = await start(client, workspace, 'sleep 60')
    const waiting = await start(client, workspace, 'echo never', { after: [sleeper.id] })
    const cancelled = await start(client, workspace, 'echo never', { after: [sleeper.id] })
    expect((await client.kill(cancelled.id)).state).toBe('killed')
    await client.kill(sleeper.id)
    expect(await client.wait(waiting.id)).toMatchObject({ state: 'failed', reason: `dependency ${sleeper.id} was killed` })
    expect((await client.get(cancelled.id)).reason).toMatch(/killed before it started/)

    const done = await client.wait((await start(client, workspace, 'true')).id)
    const late = await start(client, workspace, 'echo late', { after: [done.id, done.id] })
    expect(late.after).toEqual({ ids: [done.id], any: false })
    expect((await client.wait(late.id)).state).toBe('exited')

    // A dependency removed after it was seen to end counts as it ended.
    const gate = join(workspace, 'gate')
    const slow = await start(client, workspace, gated(gate, 'true'))
    const both = await start(client, workspace, 'echo both', { after: [done.id, slow.id] })
    await client.remove(done.id)
    writeFileSync(gate, '')
    expect((await client.wait(both.id)).state).toBe('exited')
  })

  test('--after on a cluster is refused before anything is sent', async () => {
    const home = createTempHome()
    cleanups.push(() => rmSync(home, { recursive: true, force: true }))
    const ran = await runCli(['run', '--cluster', 'redis://127.0.0.1:1', '--after', 'abcd', '-c', 'true'], daemonEnv(home))
    expect(ran.exitCode).toBe(2)
    expect(ran.stderr).toMatch(/--after: a cluster's tasks cannot wait for others/)
  })

  test('an unknown dependency is refused at submission, and afterAny needs after', async () => {
    const { daemon, home, workspace } = await daemonWithWorkspace()
    const { client } = daemon()
    await expectTendError(start(client, workspace, 'true', { after: ['zzzzzzzzzzzz'] }), 'TEND_ERR_VALIDATION', /body\/after\/0: no task zzzzzzzzzzzz/)
    await expectTendError(start(client, workspace, 'true', { afterAny: true }), 'TEND_ERR_VALIDATION', /body\/afterAny/)
    // An owner waits only for its own tasks: another owner's is no task to it.
    const theirs = await client.wait((await client.start({ command: 'true', shell: true, cwd: workspace, sandbox: 'off', owner: 'after-them' })).id)
    const asOwner = new TendClient({ home, owner: 'after-me', autoStart: false })
    cleanups.push(() => asOwner.close())
    await expectTendError(start(asOwner, workspace, 'true', { after: [theirs.id] }), 'TEND_ERR_VALIDATION', new RegExp(`no task ${theirs.id}`))
    const ran = await runCli(['run', '--sandbox', 'off', '--cwd', workspace, '--after', 'no-such-task', '-c', 'true'], daemonEnv(home))
    expect(ran.exitCode).not.toBe(0)
    expect(ran.stderr).toMatch(/task not found: no-such-task/)
    expect((await client.list({ all: true })).map((task) => task.id)).toEqual([theirs.id])
  })

  test('a chain survives daemon crashes: b waits on across a restart, and a dependency that ended while no daemon ran is judged at recovery', async () => {
    const { daemon, crash, restart, workspace, home } = await daemonWithWorkspace()
    const gate = join(workspace, 'gate')
    const a = await start(daemon().client, workspace, gated(gate, 'echo a'))
    const b = await start(daemon().client, workspace, gated(join(workspace, 'gate-b'), 'echo b'), { after: [a.id] })
    const c = await start(daemon().client, workspace, 'echo c', { after: [b.id] })
    await waitFor(`task ${a.id} running`, async () => (await daemon().client.get(a.id)).state === 'running')

    await crash()
    await restart()
    expect((await daemon().client.get(b.id)).state).toBe('queued')
    expect((await daemon().client.get(c.id)).state).toBe('queued')
    writeFileSync(gate, '')
    await waitFor(`task ${b.id} running`, async () => (await daemon().client.get(b.id)).state === 'running')
    expect((await daemon().client.get(a.id)).state).toBe('exited')

    // b ends while no daemon runs: the next one finds it ended (its keeper's exit.json) and starts c.
    await crash()
    writeFileSync(join(workspace, 'gate-b'), '')
    await waitFor(`task ${b.id} recorded its exit`, () => existsSync(join(home, 'spool', b.id, 'exit.json')))
    await restart()
    const endedC = await daemon().client.wait(c.id)
    expect(endedC.state).toBe('exited')
    expect((await daemon().client.read(c.id)).data).toBe('c\n')
  })

  test('tend stop --keep-tasks leaves a waiting task waiting for the next daemon; a plain stop fails it', async () => {
    const { daemon, restart, workspace, home } = await daemonWithWorkspace()
    const gate = join(workspace, 'gate')
    const a = await start(daemon().client, workspace, gated(gate, 'true'))
    const b = await start(daemon().client, workspace, 'echo b', { after: [a.id] })
    await waitFor(`task ${a.id} running`, async () => (await daemon().client.get(a.id)).state === 'running')
    const stopped = await runCli(['stop', '--keep-tasks'], daemonEnv(home))
    expect(stopped.exitCode, stopped.stderr).toBe(0)
    await daemon().crash()
    await restart()
    expect((await daemon().client.get(b.id)).state).toBe('queued')
    writeFileSync(gate, '')
    expect((await daemon().client.wait(b.id)).state).toBe('exited')

    const sleeper = await start(daemon().client, workspace, 'sleep 60')
    const waiting = await start(daemon().client, workspace, 'true', { after: [sleeper.id] })
    await stopKeepingHome(daemon())
    await restart()
    expect(await daemon().client.get(waiting.id)).toMatchObject({ state: 'failed', stoppedBy: 'daemon-stop' })
    expect((await daemon().client.get(sleeper.id)).state).toBe('killed')
  })

  test('a waiting task whose dependency exits 0 while no daemon runs starts, with its PORT; with other environment values it fails, saying they are never stored', async () => {
    const { daemon, crash, restart, workspace } = await daemonWithWorkspace()
    const gate = join(workspace, 'gate')
    const a = await start(daemon().client, workspace, gated(gate, 'true'))
    const plain = await daemon().client.start({ command: 'echo plain $PORT', shell: true, cwd: workspace, sandbox: 'off', port: 'auto', after: [a.id] })
    const withEnv = await daemon().client.start({ command: 'echo $SECRET', shell: true, cwd: workspace, sandbox: 'off', env: { SECRET: 'x' }, after: [a.id] })
    await waitFor(`task ${a.id} running`, async () => (await daemon().client.get(a.id)).state === 'running')
    await crash()
    await restart()
    writeFileSync(gate, '')
    const ranPlain = await daemon().client.wait(plain.id)
    expect(ranPlain.state).toBe('exited')
    // Its port is the one value of its environment the record keeps: it has it after the restart.
    expect((await daemon().client.read(plain.id)).data).toBe(`plain ${ranPlain.port}\n`)
    expect(await daemon().client.get(withEnv.id)).toMatchObject({ state: 'failed', reason: expect.stringMatching(/SECRET.*never stored/) })
  })
})
