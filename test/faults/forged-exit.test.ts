import { afterEach, expect, test } from 'vitest'
import { readdirSync, readFileSync, rmSync, chmodSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { holdsPidfdOf, isAlive, spawnerHelperOf } from '../helpers/processes.js'

// An exit file is the keeper's word on how its task ended, for when the keeper is gone. Anyone who
// can write the task's folder (an `off` task runs as the daemon's uid) can put one there: while
// the keeper lives, the keeper is the authority, and an attach (a new spawner helper, a restart)
// must wait for its own report, never settle the task from the file.

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

test.each(['off', 'workspace'] as const)('a forged exit file does not end a live %s task when its keeper is attached again', async (sandbox) => {
  const daemon: TestDaemon = await startTestDaemon()
  cleanups.push(() => daemon.stop())
  const cwd = mkdtempSync(join(tmpdir(), 'tend-forged-exit-'))
  chmodSync(cwd, 0o777)
  cleanups.push(() => rmSync(cwd, { recursive: true, force: true }))
  const task = await daemon.client.start({ command: ['sleep', '300'], cwd, sandbox })
  const running = await waitFor('the task to run', async () => {
    const now = await daemon.client.get(task.id)
    return now.state === 'running' && now.pid ? now : null
  })
  const daemonPid = (await daemon.client.status()).pid
  const helper = spawnerHelperOf(daemonPid)
  expect(helper, 'the daemon runs the native spawner').not.toBeNull()
  writeFileSync(
    join(running.spool, 'exit.json'),
    `${JSON.stringify({ v: 1, pid: running.pid, exitCode: 0, signal: null, endedAtMs: 1, endedBy: 'itself', outputLostBytes: 0 })}\n`,
  )
  process.kill(helper!, 'SIGKILL')
  await waitFor('a new spawner helper', () => {
    const next = spawnerHelperOf(daemonPid)
    return next !== null && next !== helper
  })
  // The new helper attached the keeper again once it holds a pidfd of it (the kernel's fdinfo).
  const keeper = running.keeper!.pid
  await waitFor('the new helper to hold the keeper again', () => holdsPidfdOf(spawnerHelperOf(daemonPid), keeper))
  // The daemon heard the attach answered: a request behind it on the same helper is answered too.
  await daemon.client.status()
  const after = await daemon.client.get(task.id)
  expect(after.state).toBe('running')
  const killed = await daemon.client.kill(task.id)
  expect(killed.state).toBe('killed')
  await waitFor('the task to be gone', () => !isAlive(running.pid!))
})

test('a process of the daemon’s uid cannot write a keeper’s report for it: the channel cannot be opened through /proc', async () => {
  const daemon: TestDaemon = await startTestDaemon()
  cleanups.push(() => daemon.stop())
  const cwd = mkdtempSync(join(tmpdir(), 'tend-forged-exit-'))
  chmodSync(cwd, 0o777)
  cleanups.push(() => rmSync(cwd, { recursive: true, force: true }))
  const task = await daemon.client.start({ command: ['sleep', '300'], cwd, sandbox: 'workspace' })
  const running = await waitFor('the task to run', async () => {
    const now = await daemon.client.get(task.id)
    return now.state === 'running' && now.keeper ? now : null
  })
  const keeper = running.keeper!.pid
  // What an `off` task can do: reopen every pipe or socket the keeper holds and write an exit line.
  const forge = await daemon.client.start({
    command: [
      'sh',
      '-c',
      `for f in /proc/${keeper}/fd/*; do case $(readlink $f) in pipe:*|socket:*) printf 'x 0 0\\n' 2>/dev/null > $f && echo "wrote $f";; esac; done; true`,
    ],
    cwd,
    sandbox: 'off',
  })
  const forged = await daemon.client.wait(forge.id)
  expect(forged.state).toBe('exited')
  // The forger's own ending was heard after anything it wrote reached the helper: the victim stands.
  expect((await daemon.client.get(task.id)).state).toBe('running')
  const killed = await daemon.client.kill(task.id)
  expect(killed.state).toBe('killed')
  await waitFor('the task to be gone', () => !isAlive(running.pid!))
})
