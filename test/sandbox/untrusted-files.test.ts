import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { randomBytes } from 'node:crypto'
import { spawn, execFileSync } from 'node:child_process'
import {
  chmodSync,
  chownSync,
  existsSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import { socketAnswers } from '../../client/ensure-daemon.js'
import type { StartOptions, Task } from '../../client/index.js'
import {
  checkUnprivilegedUser,
  daemonEnv,
  killEverythingOf,
  setprivArgs,
  startTestDaemon,
  stopKeepingHome,
  TEND_BIN,
  unprivilegedEnv,
  type TestDaemon,
  type TestDaemonOptions,
  noTaskProcessLeft,
} from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { chownTree as chownOwnedTree } from '../helpers/chown-tree.js'
import { eachSandboxedProfile, type SandboxedProfile } from '../helpers/profiles.js'

/*
 * Nothing a task writes steers the daemon (issue 24, findings 1, 4 and 6): a `.git` file in the cwd,
 * a sparse output, another daemon's home and its config.json. Each attempt runs as a real task in
 * a real sandbox, and is checked from here, on the host.
 *
 * Everything lives under /var/tmp: a sandboxed task has a private /tmp.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
const PYTHON = '/usr/bin/python3'
/** The marker every daemon keeps in its home (docs/spool.md). */
const HOME_MARKER = '.tend-home'
/** How long a daemon that must refuse to start may take to say so. */
const REFUSAL_TIMEOUT_MS = 20_000
const MiB = 1024 ** 2
const GiB = 1024 ** 3

function q(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`
}

function defineSuite(who: 'root' | 'non-root'): void {
  describe(`untrusted files, daemon as ${who}`, () => {
    const base = join('/var/tmp', `tend-untrusted-${who}-${process.pid}-${randomBytes(4).toString('hex')}`)
    const userHome = join(base, 'user')
    const tendHome = join(base, 'tend-home')
    const outside = join(base, 'outside')
    const owner = who === 'root' ? { uid: 0, gid: 0 } : checkUnprivilegedUser()
    const daemonUser: TestDaemonOptions['user'] = who === 'root' ? undefined : 'unprivileged'
    let daemon: TestDaemon
    const taskIds: string[] = []
    /** Daemons a test started and must be stopped whatever happens. */
    const extraDaemons: TestDaemon[] = []

    const chownTree = (path: string) => chownOwnedTree(path, owner)

    function folder(parent: string, prefix: string): string {
      const dir = mkdtempSync(join(parent, prefix))
      chownSync(dir, owner.uid, owner.gid)
      // Reachable by a root daemon's tasks (their own uid): a refusal must come from what the folder is.
      chmodSync(dir, 0o711)
      return dir
    }

    beforeAll(async () => {
      // Others may pass through (not list): a root daemon's tasks run on a uid of their own.
      mkdirSync(base, { mode: 0o711 })
      mkdirSync(userHome)
      mkdirSync(outside)
      mkdirSync(tendHome)
      chownTree(base)
      daemon = await startTestDaemon({
        user: daemonUser,
        home: tendHome,
        env: { HOME: userHome, PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_KILL_GRACE: '500ms' },
      })
    })

    afterAll(async () => {
      try {
        await noTaskProcessLeft(taskIds)
      } finally {
        for (const each of extraDaemons) await each.stop().catch(() => {})
        await daemon?.stop()
        rmSync(base, { recursive: true, force: true })
      }
    })

    const eachProfile = (title: string, body: (sandbox: SandboxedProfile) => Promise<void>, timeoutMs?: number) =>
      eachSandboxedProfile(title, () => daemon.client, body, timeoutMs)

    async function attempt(line: string, options: Partial<StartOptions> & { on?: TestDaemon } = {}): Promise<{ task: Task; output: string }> {
      const { on = daemon, ...rest } = options
      const started = await on.client.start({
        command: line,
        shell: true,
        cwd: rest.cwd ?? folder(base, 'ws-'),
        timeoutMs: 20_000,
        sandbox: 'workspace',
        ...rest,
      })
      taskIds.push(started.id)
      const task = await on.client.wait(started.id, { timeoutMs: 40_000 })
      return { task, output: (await on.client.read(started.id)).data }
    }

    describe('finding 1: a .git file in the cwd widens nothing', () => {
      eachProfile('a .git file naming a folder elsewhere (gitdir:) gives the next task in that cwd nothing more to write', async (sandbox) => {
        const cwd = folder(base, 'ws-')
        const target = folder(outside, 'gitdir-target-')
        const first = await attempt(`printf 'gitdir: %s\\n' ${q(target)} > .git && echo planted`, { cwd, sandbox })
        expect(first.output).toBe('planted\n')
        const second = await attempt(`echo pwned > ${q(join(target, 'marker'))}; echo done`, { cwd, sandbox })
        expect(second.output).toContain('done\n')
        expect(second.task.sandboxWritable).toEqual([realpathSync(cwd)])
        expect(existsSync(join(target, 'marker'))).toBe(false)
      })

      eachProfile('a git folder whose commondir names a folder elsewhere gives the next task nothing more to write either', async (sandbox) => {
        const cwd = folder(base, 'ws-')
        const target = folder(outside, 'commondir-target-')
        const first = await attempt(`mkdir gd && printf 'gitdir: gd\\n' > .git && printf '%s\\n' ${q(target)} > gd/commondir && echo planted`, { cwd, sandbox })
        expect(first.output).toBe('planted\n')
        const second = await attempt(`echo pwned > ${q(join(target, 'marker'))}; echo done`, { cwd, sandbox })
        expect(second.output).toContain('done\n')
        expect(second.task.sandboxWritable).toEqual([realpathSync(cwd)])
        expect(existsSync(join(target, 'marker'))).toBe(false)
      })

      test('a .git file at the root of a work tree the task works in makes neither that root nor what it names writable', async () => {
        const root = folder(base, 'tree-')
        mkdirSync(join(root, 'sub'))
        const target = folder(outside, 'gitdir-target-')
        writeFileSync(join(root, '.git'), `gitdir: ${target}\n`)
        chownTree(root)
        const { task, output } = await attempt(`echo pwned > ${q(join(target, 'marker'))}; echo pwned > ../marker; echo done`, { cwd: join(root, 'sub') })
        expect(output).toContain('done\n')
        expect(task.sandboxWritable).toEqual([realpathSync(join(root, 'sub'))])
        expect(existsSync(join(target, 'marker'))).toBe(false)
        expect(existsSync(join(root, 'marker'))).toBe(false)
      })

      test('git commit in a linked worktree works once the operator declares the main repository writable (--writable /repo/.git), and not before', async () => {
        const repo = folder(base, 'repo-')
        const git = (...args: string[]) =>
          execFileSync('git', ['-c', 'safe.directory=*', '-c', 'user.email=a@b', '-c', 'user.name=a', ...args], { encoding: 'utf8' })
        git('init', '-q', repo)
        writeFileSync(join(repo, 'one'), 'one\n')
        git('-C', repo, 'add', 'one')
        git('-C', repo, 'commit', '-qm', 'one')
        const worktree = join(base, `wt-${randomBytes(3).toString('hex')}`)
        git('-C', repo, 'worktree', 'add', '-q', worktree)
        mkdirSync(join(worktree, 'sub'))
        chownTree(repo)
        chownTree(worktree)
        const commit = (file: string) => `echo hi > ${file} && git add ${file} && git -c user.email=a@b -c user.name=a commit -qm ${file} && echo committed`
        const undeclared = await attempt(commit('undeclared'), { cwd: join(worktree, 'sub') })
        expect(undeclared.output).not.toContain('committed')
        expect(git('-C', repo, 'log', '--all', '--format=%s')).not.toContain('undeclared')
        const declared = await attempt(commit('declared'), { cwd: worktree, writablePaths: [join(repo, '.git')] })
        expect(declared.output).toContain('committed')
        expect(declared.task.exitCode).toBe(0)
        expect(git('-C', repo, 'log', '--all', '--format=%s')).toContain('declared')
      })
    })

    describe('finding 4: space is counted as it is used', () => {
      test('tasks that make their output.log sparse (1 GiB each) evict no other owner under a small quota, and status counts allocated blocks', async () => {
        const quotaHome = folder(base, 'quota-home-')
        const quota = await startTestDaemon({
          user: daemonUser,
          home: quotaHome,
          env: { HOME: userHome, PATH: SYSTEM_PATH, TEND_SPOOL_QUOTA: '64M', TEND_SANDBOX: 'workspace' },
        })
        let restarted: TestDaemon | undefined
        try {
          const kept = await attempt('echo kept', { on: quota, owner: 'victim' })
          expect(kept.output).toBe('kept\n')
          const sparse = `${PYTHON} -c 'import os; os.ftruncate(1, ${GiB}); print("sparse")'`
          const attackers: Task[] = []
          for (const sandbox of (await quota.client.status()).sandbox.profiles) {
            for (let n = 0; n < 2; n += 1) attackers.push((await attempt(sparse, { on: quota, owner: 'attacker', sandbox, maxOutputBytes: 2 * GiB })).task)
          }
          for (const task of attackers) expect(task.outputBytes, `${task.sandbox}: ${task.reason}`).toBeGreaterThanOrEqual(GiB)
          // The quota is enforced on a timer and at start: a daemon started again on the home has
          // enforced it before it answers.
          await quota.crash()
          restarted = await startTestDaemon({
            user: daemonUser,
            home: quotaHome,
            env: { HOME: userHome, PATH: SYSTEM_PATH, TEND_SPOOL_QUOTA: '64M', TEND_SANDBOX: 'workspace' },
          })
          const all = await restarted.client.list({ all: true })
          expect(all.map((task) => task.id)).toContain(kept.task.id)
          expect(all.filter((task) => task.owner === 'attacker')).toHaveLength(attackers.length)
          // Logical sizes stay what readers see; the spool's use is what the disk holds.
          expect(all.find((task) => task.owner === 'attacker')!.outputBytes).toBeGreaterThanOrEqual(GiB)
          const status = await restarted.client.status()
          expect(status.spool.usedBytes).toBeLessThan(16 * 1024 * 1024)
        } finally {
          await restarted?.stop()
          await quota.stop()
        }
      })

      test('running tasks that allocate their output for real (posix_fallocate, 300 MiB each, past a 1 MiB cap) evict no other owner before the cap stops them: each counts for at most its cap and slack', async () => {
        const quotaHome = folder(base, 'quota-home-')
        // The cap's poll is made slow, so that the quota meets the allocations before it does.
        const env = { HOME: userHome, PATH: SYSTEM_PATH, TEND_SPOOL_QUOTA: '256M', TEND_SANDBOX: 'workspace', TEND_OUTPUT_CHECK_INTERVAL: '60s' }
        const quota = await startTestDaemon({ user: daemonUser, home: quotaHome, env })
        let restarted: TestDaemon | undefined
        const attackers: string[] = []
        try {
          const kept = await attempt('echo kept', { on: quota, owner: 'victim' })
          expect(kept.output).toBe('kept\n')
          const grab = `${PYTHON} -c 'import os, time; os.posix_fallocate(1, 0, ${300 * MiB}); time.sleep(600)'`
          for (const sandbox of (await quota.client.status()).sandbox.profiles) {
            const started = await quota.client.start({
              command: grab,
              shell: true,
              cwd: folder(base, 'grab-'),
              owner: 'attacker',
              sandbox,
              maxOutputBytes: MiB,
              timeoutMs: 120_000,
            })
            attackers.push(started.id)
          }
          const outputs = attackers.map((id) => join(quotaHome, 'spool', id, 'output.log'))
          await waitFor('every attacker to have allocated its output', () => outputs.every((file) => lstatSync(file).blocks * 512 >= 300 * MiB), 30_000)
          // The quota is enforced at start, before the daemon answers: a daemon started again on the home has met the allocations.
          await quota.crash()
          restarted = await startTestDaemon({ user: daemonUser, home: quotaHome, env })
          const all = await restarted.client.list({ all: true })
          expect(all.map((task) => task.id)).toContain(kept.task.id)
          expect(all.filter((task) => task.owner === 'attacker')).toHaveLength(attackers.length)
          const status = await restarted.client.status()
          expect(status.spool.usedBytes).toBeLessThanOrEqual(attackers.length * (MiB + 64 * MiB + 4096) + MiB)
        } finally {
          // Ended by their cap by now, or killed here; without a daemon back on the home, everything of it is.
          if (restarted) for (const id of attackers) await restarted.client.kill(id, { graceMs: 0 }).catch(() => {})
          else await killEverythingOf(quotaHome)
          await restarted?.stop()
          await quota.stop()
        }
      })
      test('a task that takes disk past the end of its output (fallocate, keep size: no filter stops it under off) is stopped at its cap, and the disk it took is given back', async () => {
        const grab = `${PYTHON} -c 'import ctypes, time; ctypes.CDLL(None).fallocate(1, 1, ctypes.c_long(0), ctypes.c_long(${256 * MiB})); print("grabbed", flush=True); time.sleep(600)'`
        const started = await daemon.client.start({
          command: grab,
          shell: true,
          cwd: folder(base, 'grab-'),
          sandbox: 'off',
          maxOutputBytes: MiB,
          timeoutMs: 120_000,
        })
        taskIds.push(started.id)
        try {
          const task = await daemon.client.wait(started.id, { timeoutMs: 30_000 })
          expect(task).toMatchObject({ state: 'killed', stoppedBy: 'output-cap' })
          expect(task.reason).toBe('output cap of 1.0M reached (256M taken on disk past the end of its output)')
          expect(lstatSync(join(daemon.home, 'spool', started.id, 'output.log')).blocks * 512).toBeLessThan(2 * MiB)
        } finally {
          await daemon.client.kill(started.id, { graceMs: 0 })
        }
      })
    })

    describe('finding 6: every tend home is recognised, whatever HOME its daemon had', () => {
      /** A home, inside a folder of its own (the folder a task would be given to reach it). */
      function homeInHolder(label: string): { holder: string; home: string } {
        const holder = folder(base, `${label}-holder-`)
        const home = join(holder, 'home')
        mkdirSync(home, { mode: 0o700 })
        writeFileSync(join(home, 'config.json'), JSON.stringify({ sandbox: 'workspace' }))
        chownTree(holder)
        return { holder, home }
      }

      /** What a task's attempts on `home` must not achieve, checked from the host. */
      async function expectRefusedAndMasked(home: string, holder: string): Promise<void> {
        const rewrite = `echo '{"sandbox":"off"}' > config.json; echo '{"sandbox":"off"}' > home/config.json; echo done`
        const attempts: Array<[string, Partial<StartOptions>]> = [
          ['cwd is the home', { cwd: home }],
          ['cwd holds the home', { cwd: holder }],
          ['cwd lies in the home', { cwd: join(home, 'spool') }],
          ['writable path is the home', { writablePaths: [home] }],
          ['writable path holds the home', { writablePaths: [holder] }],
        ]
        for (const [label, options] of attempts) {
          await expect(attempt(rewrite, options), label).rejects.toMatchObject({ code: 'TEND_ERR_VALIDATION', message: expect.stringContaining('a tend home') })
        }
        const { output } = await attempt(
          `ls -A ${q(home)} | sed 's/^/listed: /'; cat ${q(join(home, 'config.json'))} 2>/dev/null | sed 's/^/read: /'; echo done`,
        )
        expect(output).toContain('done\n')
        expect(output).not.toMatch(/listed: |read: /)
        expect(JSON.parse(readFileSync(join(home, 'config.json'), 'utf8'))).toEqual({ sandbox: 'workspace' })
      }

      test('a running daemon with another HOME, started after this one ran a task: its home is refused and masked', async () => {
        await attempt('true')
        const { holder, home } = homeInHolder('live')
        const otherUserHome = folder(base, 'other-user-')
        const other = await startTestDaemon({ user: daemonUser, home, env: { HOME: otherUserHome, PATH: SYSTEM_PATH, TEND_SANDBOX: 'off' } })
        extraDaemons.push(other)
        await waitFor(
          'the new home to be masked for the next task',
          async () => {
            // Masked (an empty folder), or out of reach of the task's own uid (a root daemon's home is 0700).
            const { output } = await attempt(`ls -A ${q(home)} 2>/dev/null | wc -l`)
            return output.trim() === '0'
          },
          20_000,
        )
        await expectRefusedAndMasked(home, holder)
      })

      test("a stopped daemon's home (its config.json, read at its next start) is refused and masked", async () => {
        const { holder, home } = homeInHolder('stopped')
        const otherUserHome = folder(base, 'other-user-')
        const other = await startTestDaemon({ user: daemonUser, home, env: { HOME: otherUserHome, PATH: SYSTEM_PATH, TEND_SANDBOX: 'off' } })
        extraDaemons.push(other)
        await stopKeepingHome(other)
        await expectRefusedAndMasked(home, holder)
      })

      test('a folder that holds the home marker is refused as, or around, a cwd or writable path without any registry knowing it', async () => {
        const planted = folder(base, 'marked-')
        writeFileSync(join(planted, HOME_MARKER), '')
        mkdirSync(join(planted, 'inner'))
        chownTree(planted)
        for (const options of [{ cwd: planted }, { cwd: join(planted, 'inner') }, { writablePaths: [join(planted, 'inner')] }]) {
          await expect(attempt('echo pwned > marker', options), JSON.stringify(options)).rejects.toMatchObject({
            code: 'TEND_ERR_VALIDATION',
            message: expect.stringContaining('tend home'),
          })
        }
        expect(existsSync(join(planted, 'marker'))).toBe(false)
        expect(existsSync(join(planted, 'inner', 'marker'))).toBe(false)
      })

      eachProfile('a marker another user plants in a shared sticky folder (1777) blocks no task below it', async (sandbox) => {
        // As in /var/tmp: anyone may make entries there, so an entry there says nothing of a home.
        const shared = join(base, `shared-${randomBytes(3).toString('hex')}`)
        mkdirSync(shared)
        chmodSync(shared, 0o1777)
        const planter = who === 'root' ? checkUnprivilegedUser() : { uid: 0, gid: 0 }
        writeFileSync(join(shared, HOME_MARKER), '')
        chownSync(join(shared, HOME_MARKER), planter.uid, planter.gid)
        const project = folder(shared, 'proj-')
        const { task, output } = await attempt('echo made > made && echo done', { cwd: project, sandbox })
        expect(output, task.reason ?? '').toBe('done\n')
        expect(readFileSync(join(project, 'made'), 'utf8')).toBe('made\n')
      })
    })

    describe('a home or config.json another uid can write keeps the daemon from starting', () => {
      const other = who === 'root' ? checkUnprivilegedUser() : { uid: 0, gid: 0 }

      /** Runs `tend daemon` on `home` as the suite's user: its exit code and stderr, or a failure when it came up. */
      async function refusal(home: string): Promise<{ exitCode: number | null; stderr: string }> {
        const env = daemonEnv(home, { PATH: SYSTEM_PATH })
        const user = who === 'root' ? null : checkUnprivilegedUser()
        const command = user ? ['setpriv', ...setprivArgs(user), '--', process.execPath, TEND_BIN, 'daemon'] : [process.execPath, TEND_BIN, 'daemon']
        const childEnv = user ? unprivilegedEnv(env, user, userHome) : { ...env, HOME: userHome }
        const child = spawn(command[0]!, command.slice(1), { env: childEnv, cwd: '/', stdio: ['ignore', 'ignore', 'pipe'] })
        let stderr = ''
        child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
        try {
          await waitFor(
            `tend daemon on ${home} to exit (it must refuse to start; stderr so far: ${stderr})`,
            async () => {
              if (child.exitCode !== null || child.signalCode !== null) return true
              if (await socketAnswers(join(home, 'tend.sock'))) throw new Error(`the daemon started on ${home}; stderr: ${stderr}`)
              return false
            },
            REFUSAL_TIMEOUT_MS,
          )
        } finally {
          if (child.exitCode === null && child.signalCode === null) {
            child.kill('SIGTERM')
            await new Promise((resolve) => child.once('exit', resolve))
          }
        }
        return { exitCode: child.exitCode, stderr }
      }

      function goodHome(): string {
        const home = folder(base, 'refused-home-')
        chmodSync(home, 0o700)
        writeFileSync(join(home, 'config.json'), '{}\n', { mode: 0o600 })
        chownTree(home)
        return home
      }

      const cases: Array<[string, (home: string) => void, RegExp]> = [
        ['config.json owned by another uid', (home) => chownSync(join(home, 'config.json'), other.uid, other.gid), /config\.json.*owned by uid \d+.*chown/s],
        [
          'config.json writable by its group and others',
          (home) => chmodSync(join(home, 'config.json'), 0o666),
          /config\.json.*writable by (its group|others).*chmod go-w/s,
        ],
        [
          'config.json a symbolic link',
          (home) => {
            writeFileSync(join(home, 'real-config.json'), '{}\n', { mode: 0o600 })
            lchownSync(join(home, 'real-config.json'), owner.uid, owner.gid)
            rmSync(join(home, 'config.json'))
            symlinkSync(join(home, 'real-config.json'), join(home, 'config.json'))
            lchownSync(join(home, 'config.json'), owner.uid, owner.gid)
          },
          /config\.json.*symbolic link/s,
        ],
        [
          'config.json a FIFO',
          (home) => {
            rmSync(join(home, 'config.json'))
            execFileSync('mkfifo', [join(home, 'config.json')])
            lchownSync(join(home, 'config.json'), owner.uid, owner.gid)
          },
          /config\.json.*FIFO/s,
        ],
        ['the home owned by another uid', (home) => chownSync(home, other.uid, other.gid), /home.*owned by uid \d+.*chown/s],
        ['the home writable by others', (home) => chmodSync(home, 0o777), /home.*writable by (its group|others).*chmod go-w/s],
      ]
      test.each(cases)('%s: refused, naming the path and what to fix', async (_what, spoil, message) => {
        const home = goodHome()
        spoil(home)
        const { exitCode, stderr } = await refusal(home)
        expect(exitCode, stderr).toBe(2)
        expect(stderr).toContain(home)
        expect(stderr).toMatch(message)
      })

      test('a home that is a symbolic link to a folder is refused', async () => {
        const real = goodHome()
        const link = join(base, `home-link-${randomBytes(3).toString('hex')}`)
        symlinkSync(real, link)
        lchownSync(link, owner.uid, owner.gid)
        const { exitCode, stderr } = await refusal(link)
        expect(exitCode, stderr).toBe(2)
        expect(stderr).toMatch(/symbolic link/)
      })
    })
  })
}

defineSuite('root')
defineSuite('non-root')
