import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { execFileSync, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { StartOptions, Task } from '../../client/index.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { eachSandboxedProfile, type SandboxedProfile } from '../helpers/profiles.js'
import { checkUnprivilegedUser, setprivArgs, startTestDaemon, type TestDaemon, type TestDaemonOptions, type UnprivilegedUser } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * Routes the second adversarial pass found through a task's identity (issue 24, round 3): another
 * local user's git configuration run inside a root daemon's task (F2), the rights of a folder's
 * group (F10), a mount inside a writable folder that turned the task into uid 0 (F11), and an id
 * that a user takes after its owner got it (F8). Each is tried as a real task, and what it did is
 * checked from the host.
 *
 * Everything lives under /var/tmp (a sandboxed task has a private /tmp), in a folder others may
 * enter (0711): a root daemon's task uids must reach their folders.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
const SECRET = `PLANTED-GROUP-SECRET-${randomBytes(4).toString('hex')}`
/** The kernel's "nobody": another local user for a daemon that is itself tend-test. */
const NOBODY: UnprivilegedUser = { name: 'nobody', uid: 65534, gid: 65534 }
const ranAsOf = (task: Task) => ('ranAs' in task ? task.ranAs : undefined)
const q = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`

function defineSuite(who: 'root' | 'non-root'): void {
  describe(`identity routes, daemon as ${who}`, () => {
    const base = join('/var/tmp', `tend-identity-routes-${who}-${process.pid}-${randomBytes(4).toString('hex')}`)
    const home = join(base, 'home')
    const owner = who === 'root' ? { uid: 0, gid: 0 } : checkUnprivilegedUser()
    // Another local user, who plants what a task of this daemon must not run.
    const attacker = who === 'root' ? checkUnprivilegedUser() : NOBODY
    const daemonUser: TestDaemonOptions['user'] = who === 'root' ? undefined : 'unprivileged'
    let daemon: TestDaemon
    const taskIds: string[] = []

    beforeAll(async () => {
      mkdirSync(base, { mode: 0o711 })
      chmodSync(base, 0o711)
      mkdirSync(home, { mode: 0o700 })
      chownSync(home, owner.uid, owner.gid)
      daemon = await startTestDaemon({ user: daemonUser, env: { HOME: home, PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_KILL_GRACE: '500ms' } })
    })

    afterAll(async () => {
      try {
        await waitFor('no process of any identity-route task left', () =>
          taskIds.every((id) => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0),
        )
      } finally {
        await daemon?.stop()
        rmSync(base, { recursive: true, force: true })
      }
    })

    const eachProfile = (title: string, body: (sandbox: SandboxedProfile) => Promise<void>) => eachSandboxedProfile(title, () => daemon.client, body)

    /** A folder made here, owned by `by`, with `mode`. */
    function folder(parent: string, by: { uid: number; gid: number }, mode: number): string {
      const dir = mkdtempSync(join(parent, 'f-'))
      chownSync(dir, by.uid, by.gid)
      chmodSync(dir, mode)
      return dir
    }

    async function attempt(line: string, options: Partial<StartOptions> & { cwd: string }): Promise<{ task: Task; output: string }> {
      const started = await daemon.client.start({ command: line, shell: true, timeoutMs: 30_000, sandbox: 'workspace', ...options })
      taskIds.push(started.id)
      const task = await daemon.client.wait(started.id, { timeoutMs: 45_000 })
      return { task, output: (await daemon.client.read(started.id)).data }
    }

    /** Runs a command on the host as `user` (no supplementary groups), with git's own settings only. */
    function as(user: { uid: number; gid: number; name?: string }, command: string[], cwd = '/'): string {
      const env = {
        PATH: SYSTEM_PATH,
        HOME: '/nonexistent',
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_AUTHOR_NAME: 'a',
        GIT_AUTHOR_EMAIL: 'a@b',
        GIT_COMMITTER_NAME: 'a',
        GIT_COMMITTER_EMAIL: 'a@b',
      }
      return execFileSync('setpriv', [...setprivArgs({ name: user.name ?? String(user.uid), ...user }), '--', ...command], { cwd, env, encoding: 'utf8' })
    }

    describe("F2: git runs no other user's configuration in a task", () => {
      /** A repository of the attacker's at `dir` whose fsmonitor hook (run by `git status`) appends to `target` (relative to the work tree). */
      function plantRepository(dir: string, target: string): void {
        as(attacker, ['git', 'init', '-q', dir])
        as(attacker, ['git', 'config', '--file', join(dir, '.git', 'config'), 'core.fsmonitor', `echo PWNED >> ${target}`])
      }

      /** The daemon owner's file with a known text, for the hook to append to. */
      function ownersFile(path: string): void {
        writeFileSync(path, 'all:\n', { mode: 0o644 })
        chownSync(path, owner.uid, owner.gid)
      }

      eachProfile('a repository another user made in a world-writable folder above the cwd (/var/tmp/X/.git, the cwd X/proj) is not used', async (sandbox) => {
        const shared = folder(base, { uid: 0, gid: 0 }, 0o1777)
        const project = join(shared, 'proj')
        mkdirSync(project)
        chownSync(project, owner.uid, owner.gid)
        ownersFile(join(project, 'Makefile'))
        plantRepository(shared, 'proj/Makefile')
        const { task, output } = await attempt('git status; echo "status $?"', { cwd: project, sandbox })
        expect(task.state, output).toBe('exited')
        expect(output).toMatch(/status 128\n$/)
        expect(readFileSync(join(project, 'Makefile'), 'utf8')).toBe('all:\n')
      })

      eachProfile('a repository another user made in a world-writable cwd is not used, nor one a .git file there names', async (sandbox) => {
        const shared = folder(base, { uid: 0, gid: 0 }, 0o1777)
        ownersFile(join(shared, 'Makefile'))
        plantRepository(shared, 'Makefile')
        const planted = await attempt('git status; echo "status $?"', { cwd: shared, sandbox })
        expect(planted.output).toMatch(/dubious ownership(.|\n)*status 128\n$/)
        // The same through a .git file: the repository it names is the attacker's own, elsewhere.
        const other = folder(base, { uid: 0, gid: 0 }, 0o1777)
        ownersFile(join(other, 'Makefile'))
        const elsewhere = folder(base, attacker, 0o755)
        plantRepository(elsewhere, 'Makefile')
        as(attacker, ['sh', '-c', `printf 'gitdir: %s\\n' ${q(join(elsewhere, '.git'))} > ${q(join(other, '.git'))}`])
        const named = await attempt('git status; echo "status $?"', { cwd: other, sandbox })
        expect(named.output).toMatch(/dubious ownership(.|\n)*status 128\n$/)
        expect(readFileSync(join(shared, 'Makefile'), 'utf8')).toBe('all:\n')
        expect(readFileSync(join(other, 'Makefile'), 'utf8')).toBe('all:\n')
      })

      eachProfile("a repository of another user's folder around the cwd (theirs, not world-writable) is neither written nor used", async (sandbox) => {
        const theirs = folder(base, attacker, 0o755)
        const project = join(theirs, 'proj')
        mkdirSync(project)
        chownSync(project, owner.uid, owner.gid)
        ownersFile(join(project, 'Makefile'))
        plantRepository(theirs, 'proj/Makefile')
        const { task, output } = await attempt('git status; echo "status $?"; touch ../widened', { cwd: project, sandbox })
        expect(task.state, output).toBe('exited')
        expect(output).toMatch(/status 128\n/)
        expect(task.sandboxWritable).toEqual([project])
        expect(readFileSync(join(project, 'Makefile'), 'utf8')).toBe('all:\n')
        expect(existsSync(join(theirs, 'widened'))).toBe(false)
      })
    })

    if (who !== 'root') return

    describe("F10: a task gets its folder owner's group, never the folder's", () => {
      /** A folder of `by` whose group is root, holding root's 0660 app.conf, as the adversarial pass set it up. */
      function groupRootFolder(by: { uid: number; gid: number }): string {
        const dir = folder(base, { uid: by.uid, gid: 0 }, 0o755)
        writeFileSync(join(dir, 'app.conf'), `${SECRET}\n`, { mode: 0o660 })
        return dir
      }
      const probe = 'cat app.conf; echo appended >> app.conf; echo made > made; echo done'

      eachProfile(
        "in a folder tend-test owns with group root, root's 0660 file stays closed (as to tend-test itself); what the task makes gets tend-test's group",
        async (sandbox) => {
          const user = checkUnprivilegedUser()
          const dir = groupRootFolder(user)
          // The control: tend-test itself may not read it.
          expect(spawnSync('setpriv', [...setprivArgs(user), '--', 'cat', join(dir, 'app.conf')], { encoding: 'utf8' }).stderr).toContain('Permission denied')
          const { task, output } = await attempt(probe, { cwd: dir, sandbox })
          expect(task.state, output).toBe('exited')
          expect(output).not.toContain(SECRET)
          expect(output.match(/Permission denied/g), output).toHaveLength(2)
          expect(readFileSync(join(dir, 'app.conf'), 'utf8')).toBe(`${SECRET}\n`)
          const made = lstatSync(join(dir, 'made'))
          expect(`${made.uid}:${made.gid}`).toBe(`${user.uid}:${user.gid}`)
        },
      )

      eachProfile(
        "in a folder of a uid no passwd entry names, with group root, the task holds no group's rights, and what it makes is no known group's",
        async (sandbox) => {
          const unknown = unusedUid()
          const dir = groupRootFolder({ uid: unknown, gid: 0 })
          const { task, output } = await attempt(probe, { cwd: dir, sandbox })
          expect(task.state, output).toBe('exited')
          expect(output).not.toContain(SECRET)
          expect(output.match(/Permission denied/g), output).toHaveLength(2)
          expect(readFileSync(join(dir, 'app.conf'), 'utf8')).toBe(`${SECRET}\n`)
          const made = lstatSync(join(dir, 'made'))
          expect(made.uid).toBe(unknown)
          expect(spawnSync('getent', ['group', String(made.gid)]).status, `getent group ${made.gid}`).toBe(2)
        },
      )
    })

    describe('F11: a mount inside a writable folder fails the task, never runs it as uid 0', () => {
      test('a ramfs mounted inside the cwd (as a FUSE mount a user made there would be): the task fails, naming the folder, why and what to do', async () => {
        const cwd = folder(base, owner, 0o755)
        const inside = join(cwd, 'mounted')
        mkdirSync(inside)
        execFileSync('mount', ['-t', 'ramfs', '-o', 'mode=0777', 'ramfs', inside])
        try {
          const { task, output } = await attempt('id -u; echo x > made', { cwd })
          expect(task.state).toBe('failed')
          expect(output).toBe('')
          expect(task.reason).toMatch(new RegExp(`^could not idmap ${cwd} for the task's user: EINVAL .*; the task was not run on uid 0 instead: .*unmount`))
          expect(ranAsOf(task)).toBeUndefined()
          expect(existsSync(join(cwd, 'made'))).toBe(false)
          // The machine-level fallback is not this: sandboxed tasks still run on their own identity.
          expect((await daemon.client.status()).sandbox.identity).toMatchObject({ as: 'task', fallback: null })
        } finally {
          execFileSync('umount', [inside])
        }
      })
    })

    describe('F11, the same class: an owner whose task id cannot be chosen', () => {
      test("when the user database stops answering, a new owner's task fails, saying why, and never runs as uid 0", async () => {
        // A getent that answers until told not to: the daemon chooses its first owner's id at
        // start with the real one, and a later owner's when it fails.
        const tools = folder(base, { uid: 0, gid: 0 }, 0o755)
        const broken = join(tools, 'broken')
        writeFileSync(join(tools, 'getent'), `#!/bin/sh\n[ -e ${q(broken)} ] && { echo 'getent: no answer' >&2; exit 3; }\nexec /usr/bin/getent "$@"\n`, {
          mode: 0o755,
        })
        const other = await startTestDaemon({ env: { HOME: home, PATH: `${tools}:${SYSTEM_PATH}`, TEND_SANDBOX: 'workspace' } })
        try {
          expect((await other.client.status()).sandbox.identity).toMatchObject({ as: 'task', fallback: null })
          writeFileSync(broken, '')
          const cwd = folder(base, owner, 0o755)
          const started = await other.client.start({
            command: 'id -u; echo x > made',
            shell: true,
            cwd,
            owner: `new-${randomBytes(3).toString('hex')}`,
            sandbox: 'workspace',
            timeoutMs: 30_000,
          })
          const task = await other.client.wait(started.id, { timeoutMs: 45_000 })
          expect(task.state).toBe('failed')
          expect(task.reason).toMatch(
            /^no uid could be chosen for the tasks of new-\w+: getent passwd \d+ exited 3: getent: no answer; the task was not run on uid 0 instead$/,
          )
          expect((await other.client.read(started.id)).data).toBe('')
          expect(existsSync(join(cwd, 'made'))).toBe(false)
        } finally {
          await other.stop()
        }
      })
    })

    describe('F8: an id a user takes after its owner got it', () => {
      /** Starts a task that stays (sleep), and answers it with the host pid of its sleep. */
      async function staying(cwd: string, taskOwner: string): Promise<{ task: Task; pid: number }> {
        const started = await daemon.client.start({ command: 'exec sleep 60', shell: true, cwd, owner: taskOwner, sandbox: 'workspace', timeoutMs: 60_000 })
        taskIds.push(started.id)
        const pid = await waitFor(
          `the sleep of task ${started.id}`,
          () =>
            processesWithEnv(`TEND_TASK_ID=${started.id}`).find((each) => {
              try {
                return readFileSync(`/proc/${each}/comm`, 'utf8') === 'sleep\n'
              } catch {
                return false
              }
            }),
          20_000,
        )
        // The process runs before its record says so (the daemon records the start once its spawner answers).
        const task = await waitFor(`the record of task ${started.id} to say it runs`, async () => {
          const now = await daemon.client.get(started.id)
          return now.state === 'running' ? now : undefined
        })
        return { task, pid }
      }

      for (const database of ['passwd', 'group'] as const) {
        const newcomer = database === 'passwd' ? 'user' : "group's member"
        test(`a ${database === 'passwd' ? 'user' : 'group'} made with an owner's task id: that ${newcomer} cannot write the owner's next task's folder through /proc, which runs on another id`, async () => {
          const taskOwner = `late-${database}-${randomBytes(3).toString('hex')}`
          const running: string[] = []
          const name = `tend-late-${randomBytes(3).toString('hex')}`
          let made = false
          try {
            const first = await staying(folder(base, owner, 0o755), taskOwner)
            running.push(first.task.id)
            const taken = ranAsOf(first.task)!.uid
            expect(taken).toBeGreaterThan(0)
            if (database === 'passwd')
              execFileSync('useradd', [
                '--no-create-home',
                '--no-user-group',
                '--home-dir',
                '/nonexistent',
                '--shell',
                '/usr/sbin/nologin',
                '--uid',
                String(taken),
                name,
              ])
            else execFileSync('groupadd', ['--gid', String(taken), name])
            made = true
            const cwd = folder(base, owner, 0o755)
            const second = await staying(cwd, taskOwner)
            running.push(second.task.id)
            // The newcomer tries the task's folder through its root, as the adversarial pass did.
            const ids = database === 'passwd' ? { uid: taken, gid: 65534 } : { uid: 65534, gid: taken }
            const tried = spawnSync('setpriv', [...setprivArgs({ name, ...ids }), '--', 'sh', '-c', `echo pwned > /proc/${second.pid}/root${cwd}/marker`], {
              encoding: 'utf8',
            })
            expect(existsSync(join(cwd, 'marker')), "the newcomer wrote into the task's folder").toBe(false)
            expect(tried.status, tried.stderr).not.toBe(0)
            const now = ranAsOf(second.task)!.uid
            expect(now, 'the owner got a new id').not.toBe(taken)
            for (const each of ['passwd', 'group']) expect(spawnSync('getent', [each, String(now)]).status, `getent ${each} ${now}`).toBe(2)
            expect((await daemon.client.status()).sandbox.identity.owners).toContainEqual({ owner: taskOwner, uid: now, gid: now })
          } finally {
            for (const each of running) await daemon.client.kill(each, { graceMs: 0 })
            await waitFor('the late-id tasks to be gone', () => running.every((id) => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0))
            if (made) execFileSync(database === 'passwd' ? 'userdel' : 'groupdel', [name])
          }
        })
      }
    })
  })
}

/** A uid that neither the user database nor the range of task ids has. */
function unusedUid(): number {
  for (;;) {
    const uid = 3_000_000 + Math.floor(Math.random() * 1_000_000)
    if (spawnSync('getent', ['passwd', String(uid)]).status === 2 && spawnSync('getent', ['group', String(uid)]).status === 2) return uid
  }
}

defineSuite('root')
defineSuite('non-root')
