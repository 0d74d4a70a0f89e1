import { afterAll, beforeAll, describe, expect } from 'vitest'
import { execFileSync, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { StartOptions, Task } from '../../client/index.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { eachSandboxedProfile } from '../helpers/profiles.js'
import { checkUnprivilegedUser, startTestDaemon, type TestDaemon, type TestDaemonOptions } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * What everyday tools expect of the user they run as, for a root daemon's tasks on a uid of their
 * own (one that no user database knows): a name (whoami, id -un, Node's os.userInfo(), ssh), and
 * git's trust in the repositories the task was given (its folders' own, and a linked worktree
 * whose main repository was not declared), and in no other (git's "dubious ownership": a
 * repository of root's elsewhere, which the task does not own). Checked with real tasks; the
 * host's own files and user database are checked unchanged from outside. An unprivileged daemon's
 * tasks run as its user, whom the host knows: they get neither.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
const HOST_GIT_ENV = {
  PATH: SYSTEM_PATH,
  GIT_CONFIG_NOSYSTEM: '1',
  HOME: '/nonexistent',
  GIT_AUTHOR_NAME: 'Host',
  GIT_AUTHOR_EMAIL: 'host@example.invalid',
  GIT_COMMITTER_NAME: 'Host',
  GIT_COMMITTER_EMAIL: 'host@example.invalid',
}

function defineSuite(who: 'root' | 'non-root'): void {
  describe(`the task's account and git's trust, daemon as ${who}`, () => {
    const base = join('/var/tmp', `tend-account-${who}-${process.pid}-${randomBytes(4).toString('hex')}`)
    const home = join(base, 'home')
    const owner = who === 'root' ? { uid: 0, gid: 0 } : checkUnprivilegedUser()
    const daemonUser: TestDaemonOptions['user'] = who === 'root' ? undefined : 'unprivileged'
    let daemon: TestDaemon
    const taskIds: string[] = []

    beforeAll(async () => {
      mkdirSync(home, { recursive: true, mode: 0o700 })
      chmodSync(base, 0o711)
      chownSync(home, owner.uid, owner.gid)
      daemon = await startTestDaemon({ user: daemonUser, env: { HOME: home, PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_KILL_GRACE: '500ms' } })
    })

    afterAll(async () => {
      try {
        await waitFor('no process of any account-suite task left', () =>
          taskIds.every((id) => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0),
        )
      } finally {
        await daemon?.stop()
        rmSync(base, { recursive: true, force: true })
      }
    })

    /** A 0755 folder of the daemon's user. */
    function folder(): string {
      const dir = mkdtempSync(join(base, 'ws-'))
      chownSync(dir, owner.uid, owner.gid)
      chmodSync(dir, 0o755)
      return dir
    }

    async function attempt(line: string, options: Partial<StartOptions> = {}): Promise<{ task: Task; output: string }> {
      const started = await daemon.client.start({ command: line, shell: true, cwd: options.cwd ?? folder(), timeoutMs: 30_000, ...options })
      taskIds.push(started.id)
      const task = await daemon.client.wait(started.id, { timeoutMs: 45_000 })
      return { task, output: (await daemon.client.read(started.id)).data }
    }

    const eachProfile = (title: string, body: (sandbox: 'workspace' | 'strict') => Promise<void>) => eachSandboxedProfile(title, () => daemon.client, body)
    const userInfo = `node -e 'const u = require("os").userInfo(); console.log(u.username, u.uid, u.gid, u.homedir, u.shell)'`

    if (who === 'root') {
      eachProfile(
        "the task's uid has a name: whoami, id -un, id -gn and os.userInfo() answer tend-task with the task's HOME; the host's user database is unchanged",
        async (sandbox) => {
          const passwdBefore = readFileSync('/etc/passwd')
          const groupBefore = readFileSync('/etc/group')
          const { task, output } = await attempt(`whoami; id -un; id -gn; ${userInfo}; getent passwd root | cut -d: -f1,3`, { sandbox })
          expect(task.state, output).toBe('exited')
          const uid = 'ranAs' in task ? task.ranAs!.uid : -1
          expect(output).toBe(`tend-task\ntend-task\ntend-task\ntend-task ${uid} ${uid} ${home} /bin/sh\nroot:0\n`)
          // The home is the task's own HOME, as its environment gives it.
          const elsewhere = await attempt(`getent passwd "$(id -u)" | cut -d: -f1,6,7`, { sandbox, env: { HOME: base } })
          expect(elsewhere.output).toBe(`tend-task:${base}:/bin/sh\n`)
          // From the host: its files are as they were, and no user database knows the uid.
          expect(readFileSync('/etc/passwd').equals(passwdBefore), '/etc/passwd unchanged').toBe(true)
          expect(readFileSync('/etc/group').equals(groupBefore), '/etc/group unchanged').toBe(true)
          expect(spawnSync('getent', ['passwd', String(uid)]).status, `getent passwd ${uid} on the host`).toBe(2)
          expect(spawnSync('getent', ['group', String(uid)]).status, `getent group ${uid} on the host`).toBe(2)
        },
      )

      eachProfile(
        'tasks start while the host replaces /etc/passwd and /etc/group (as useradd does, by rename), and see their account once it stops',
        async (sandbox) => {
          // The same contents, renamed into place again and again: what adding a user does to the files.
          const files = ['/etc/passwd', '/etc/group'].map((path) => ({ path, text: readFileSync(path), temporary: `${path}.tend-test-${process.pid}` }))
          let replacing = true
          const replacer = (async () => {
            while (replacing) {
              for (const file of files) {
                writeFileSync(file.temporary, file.text, { mode: 0o644 })
                renameSync(file.temporary, file.path)
              }
              await new Promise((resolve) => setImmediate(resolve))
            }
          })()
          const ended: Array<{ state: string; output: string }> = []
          try {
            for (let round = 0; round < 20; round++) {
              const { task, output } = await attempt('true', { sandbox })
              ended.push({ state: `${task.state} ${task.exitCode}`, output })
            }
          } finally {
            replacing = false
            await replacer
            for (const file of files) rmSync(file.temporary, { force: true })
          }
          expect(
            ended.filter((each) => each.state !== 'exited 0'),
            'tasks that did not start and exit 0',
          ).toEqual([])
          const { output } = await attempt('whoami', { sandbox })
          expect(output).toBe('tend-task\n')
        },
      )

      eachProfile(
        "git trusts the repositories it was given, and no other: git log works in an undeclared linked worktree (the cwd), and is refused in a repository of root's elsewhere",
        async (sandbox) => {
          const repos = mkdtempSync(join(base, 'repos-'))
          chmodSync(repos, 0o755)
          const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, encoding: 'utf8', env: HOST_GIT_ENV })
          const readOnly = join(repos, 'read-only')
          const main = join(repos, 'main')
          const linked = join(repos, 'linked')
          for (const repo of [readOnly, main]) {
            mkdirSync(repo)
            git(repo, 'init', '-q')
            git(repo, 'commit', '-q', '--allow-empty', '-m', `made in ${repo}`)
          }
          git(main, 'worktree', 'add', '-q', linked)
          const elsewhere = await attempt(`git -C ${readOnly} log -1 --format=%s 2>&1`, { sandbox })
          const inLinked = await attempt('git log -1 --format=%s 2>&1; git status --porcelain 2>&1; echo "status $?"', { sandbox, cwd: linked })
          expect({ elsewhere: elsewhere.output, inLinked: inLinked.output }).toEqual({
            elsewhere: expect.stringMatching(new RegExp(`^fatal: detected dubious ownership in repository at '${readOnly}'\n`)),
            inLinked: `made in ${main}\nstatus 0\n`,
          })
        },
      )

      eachProfile(
        'git configuration the task gives in its environment is kept, and the trust in its folder (and the ceiling above it) added after it',
        async (sandbox) => {
          const cwd = folder()
          const env = { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'user.name', GIT_CONFIG_VALUE_0: 'Given By The Task', GIT_CEILING_DIRECTORIES: '/given' }
          const { output } = await attempt('echo "$GIT_CONFIG_COUNT $GIT_CEILING_DIRECTORIES"; git config user.name; git config --get-all safe.directory', {
            sandbox,
            env,
            cwd,
          })
          expect(output).toBe(`2 /given:${base}\nGiven By The Task\n${cwd}\n`)
        },
      )
    } else {
      eachProfile("the task runs as the daemon's user, named by the host's database; git's trust is left as it is", async (sandbox) => {
        const user = checkUnprivilegedUser()
        const { output } = await attempt(
          `whoami; ${userInfo}; grep -c '^tend-task:' /etc/passwd; echo "\${GIT_CONFIG_COUNT-none} \${GIT_CEILING_DIRECTORIES-none}"`,
          { sandbox },
        )
        expect(output).toMatch(new RegExp(`^${user.name}\n${user.name} ${user.uid} ${user.gid} \\S+ \\S+\n0\nnone none\n$`))
      })
    }
  })
}

defineSuite('root')
defineSuite('non-root')
