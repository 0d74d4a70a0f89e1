import { afterAll, beforeAll, describe, expect } from 'vitest'
import { randomBytes } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { chownSync, existsSync, lstatSync, mkdirSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Task } from '../../client/index.js'
import { checkUnprivilegedUser, startTestDaemon, stopAll, type TestDaemon, noTaskProcessLeft } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { eachSandboxedProfile, type SandboxedProfile } from '../helpers/profiles.js'

/*
 * A task's folders are checked against the protected places when it is accepted, and again when
 * it launches: a task queued behind others may wait for minutes, and meanwhile a user's home or a
 * tend home can appear inside its cwd. Such a task fails, saying why, and never touches it.
 * Checked on the host.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

function defineSuite(who: 'root' | 'non-root'): void {
  describe(`a queued task checked again at launch, daemon as ${who}`, () => {
    const base = join('/var/tmp', `tend-recheck-${who}-${process.pid}-${randomBytes(4).toString('hex')}`)
    const owner = who === 'root' ? { uid: 0, gid: 0 } : checkUnprivilegedUser()
    let daemon: TestDaemon
    const others: TestDaemon[] = []
    const users: string[] = []
    const taskIds: string[] = []

    beforeAll(async () => {
      mkdirSync(base, { mode: 0o711 })
      // One task at a time: the second waits in the queue.
      daemon = await startTestDaemon({
        user: who === 'root' ? undefined : 'unprivileged',
        env: { PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_CONCURRENCY: '1' },
      })
    })

    afterAll(async () => {
      try {
        await noTaskProcessLeft(taskIds)
      } finally {
        try {
          await stopAll(daemon, ...others)
        } finally {
          for (const name of users) execFileSync('userdel', [name])
          rmSync(base, { recursive: true, force: true })
        }
      }
    })

    function folder(name: string): string {
      const path = join(base, `${name}-${randomBytes(3).toString('hex')}`)
      mkdirSync(path, { mode: 0o755 })
      chownSync(path, owner.uid, owner.gid)
      return path
    }

    /** Starts `line` in `cwd` behind a task that holds the only slot; `meanwhile` runs while it is queued, then the slot frees. */
    async function queuedBehind(line: string, cwd: string, sandbox: SandboxedProfile, meanwhile: () => Promise<void>): Promise<Task> {
      const blocker = await daemon.client.start({ command: ['cat'], stdin: 'pipe', cwd: folder('blocker'), sandbox, timeoutMs: 60_000 })
      taskIds.push(blocker.id)
      await waitFor('the blocking task running', async () => (await daemon.client.get(blocker.id)).state === 'running', 20_000)
      const queued = await daemon.client.start({ command: line, shell: true, cwd, sandbox, timeoutMs: 20_000 })
      taskIds.push(queued.id)
      expect((await daemon.client.get(queued.id)).state).toBe('queued')
      await meanwhile()
      expect((await daemon.client.get(queued.id)).state).toBe('queued')
      await daemon.client.input(blocker.id, '', { eof: true })
      expect((await daemon.client.wait(blocker.id, { timeoutMs: 40_000 })).exitCode).toBe(0)
      return daemon.client.wait(queued.id, { timeoutMs: 40_000 })
    }

    if (who === 'root') {
      eachSandboxedProfile(
        "a user's home made inside its cwd while it waited: it fails, and the home is as useradd made it",
        () => daemon.client,
        async (sandbox) => {
          const cwd = folder('cwd')
          const name = `tq${randomBytes(3).toString('hex')}`
          const home = join(cwd, 'home-q')
          const task = await queuedBehind('mv home-q home-q.old; mkdir -p home-q; echo evil > home-q/.profile; echo done', cwd, sandbox, async () => {
            execFileSync('useradd', ['--create-home', '--home-dir', home, '--shell', '/usr/sbin/nologin', '--user-group', name])
            users.push(name)
          })
          expect(task.state, task.reason ?? '').toBe('failed')
          expect(task.reason).toContain(`the home of ${name}`)
          expect((await daemon.client.read(task.id)).data).toBe('')
          const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }))
          expect(existsSync(join(cwd, 'home-q.old'))).toBe(false)
          expect(lstatSync(home).uid).toBe(uid)
          if (existsSync(join(home, '.profile'))) expect(readFileSync(join(home, '.profile'), 'utf8')).not.toBe('evil\n')
        },
      )
    }

    eachSandboxedProfile(
      'a tend home made inside its cwd while it waited: it fails, and the home is untouched',
      () => daemon.client,
      async (sandbox) => {
        const cwd = folder('cwd')
        const home = join(cwd, 'tend-home')
        const task = await queuedBehind(
          `echo '{"sandbox":"off"}' > tend-home/config.json; echo planted > tend-home/planted; echo done`,
          cwd,
          sandbox,
          async () => {
            mkdirSync(home, { mode: 0o700 })
            others.push(
              await startTestDaemon({ user: who === 'root' ? undefined : 'unprivileged', home, env: { PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace' } }),
            )
          },
        )
        expect(task.state, task.reason ?? '').toBe('failed')
        expect(task.reason).toContain('a tend home')
        expect((await daemon.client.read(task.id)).data).toBe('')
        expect(existsSync(join(home, 'planted'))).toBe(false)
        expect(existsSync(join(home, 'config.json'))).toBe(false)
      },
    )
  })
}

defineSuite('root')
defineSuite('non-root')
