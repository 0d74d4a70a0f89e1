import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { randomBytes } from 'node:crypto'
import { chownSync, existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { findOnPath } from '../../daemon/sandbox/capabilities.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { checkUnprivilegedUser, startTestDaemon, type TestDaemon, endSuite } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * Where the daemon waits for bubblewrap's setup (masks mounted by path: a daemon that is not
 * root, with either spawner), a setup that never ends (a bind over a file system that does not
 * answer) must not hold the task, its kill or the daemon's stop for ever: past TEND_SETUP_WAIT the
 * setup is killed with its process group and the task fails, saying so. The hang is made
 * deterministic: bubblewrap, on the daemon's PATH, is a wrapper that sleeps, once, before the
 * real one, holding the setup channel open as bubblewrap would.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
const BWRAP = findOnPath('bwrap', SYSTEM_PATH)

function q(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`
}

describe.each(['native', 'node'] as const)('a sandbox setup that hangs, under a daemon that is not root (%s spawner)', (spawner) => {
  const base = join('/var/tmp', `tend-setup-wait-${spawner}-${process.pid}-${randomBytes(4).toString('hex')}`)
  const userHome = join(base, 'home')
  const workspace = join(base, 'ws')
  const bin = join(base, 'bin')
  /** Run once (then renamed) by the wrapper right before bubblewrap sets up a task's sandbox. */
  const hook = join(bin, 'before-setup.sh')
  let daemon: TestDaemon
  const taskIds: string[] = []

  beforeAll(async () => {
    expect(BWRAP, 'bubblewrap is not installed').not.toBeNull()
    const owner = checkUnprivilegedUser()
    mkdirSync(base, { mode: 0o711 })
    for (const dir of [userHome, workspace, bin]) {
      mkdirSync(dir, { mode: 0o711 })
      chownSync(dir, owner.uid, owner.gid)
    }
    writeFileSync(
      join(bin, 'bwrap'),
      `#!/bin/sh\ncase " $* " in *" --args "*) if [ -f ${q(hook)} ]; then mv ${q(hook)} ${q(`${hook}.ran`)} && . ${q(`${hook}.ran`)}; fi ;; esac\nexec ${q(BWRAP!)} "$@"\n`,
      { mode: 0o755 },
    )
    daemon = await startTestDaemon({
      user: 'unprivileged',
      env: { HOME: userHome, PATH: `${bin}:${SYSTEM_PATH}`, TEND_SANDBOX: 'workspace', TEND_SPAWNER: spawner, TEND_SETUP_WAIT: '700ms' },
    })
    expect((await daemon.client.status()).spawner, 'the daemon runs another spawner').toBe(spawner)
  })

  afterAll(() => endSuite(taskIds, base, daemon))

  test('the task fails past the wait, saying its setup was stopped, with nothing of it left; the next task runs', async () => {
    writeFileSync(hook, 'echo mounting a folder that does not answer >&2; sleep 600\n', { mode: 0o644 })
    const started = await daemon.client.start({ command: 'echo ran', shell: true, cwd: workspace, sandbox: 'workspace' })
    taskIds.push(started.id)
    const ended = await daemon.client.wait(started.id)
    expect(existsSync(hook), 'the wrapper did not run the hook').toBe(false)
    expect(ended).toMatchObject({ state: 'failed' })
    expect(ended.reason).toMatch(/was still setting up after 700 ms and was stopped: mounting a folder that does not answer$/)
    expect((await daemon.client.read(started.id)).data).toBe('')
    await waitFor('the hung setup is gone', () => processesWithEnv(`TEND_TASK_ID=${started.id}`).filter(isAlive).length === 0)

    const next = await daemon.client.start({ command: 'echo ran', shell: true, cwd: workspace, sandbox: 'workspace' })
    taskIds.push(next.id)
    expect(await daemon.client.wait(next.id)).toMatchObject({ state: 'exited', exitCode: 0 })
    expect((await daemon.client.read(next.id)).data).toBe('ran\n')
  })

  test('a kill of a task whose setup hangs is answered, and records it stopped before it started', async () => {
    writeFileSync(hook, 'sleep 600\n', { mode: 0o644 })
    const started = await daemon.client.start({ command: 'echo ran', shell: true, cwd: workspace, sandbox: 'workspace' })
    taskIds.push(started.id)
    await waitFor('the wrapper ran the hook', () => !existsSync(hook))
    const killed = await daemon.client.kill(started.id)
    expect(['failed', 'killed']).toContain(killed.state)
    expect((await daemon.client.read(started.id)).data).toBe('')
  })
})
