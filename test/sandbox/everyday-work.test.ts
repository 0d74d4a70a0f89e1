import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { closeSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { StartOptions, Task } from '../../client/index.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { checkUnprivilegedUser, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { chownTree } from '../helpers/chown-tree.js'

/*
 * Everyday work in the default profile (workspace) still just works, with the daemon as root and
 * as a user: the things an agent's commands do all day. Every step runs as a real task; what it
 * left is checked on the host. A root daemon's tasks run on an identity of their own, never uid 0,
 * and what they leave in a folder belongs to that folder's owner.
 *
 * Everything lives under /var/tmp: a sandboxed task has a private /tmp.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
/** Processes the parallel build holds at once: the issue's "2,000-process parallel build". */
const BUILD_PROCESSES = 2000
const TASK_TIMEOUT_MS = 120_000

function defineEverydayWork(who: 'root' | 'non-root'): void {
  describe(`everyday work in workspace, daemon as ${who}`, () => {
    const base = join('/var/tmp', `tend-everyday-${who}-${process.pid}-${randomBytes(4).toString('hex')}`)
    const user = checkUnprivilegedUser()
    const daemonOwner = who === 'root' ? { uid: 0, gid: 0 } : { uid: user.uid, gid: user.gid }
    let daemon: TestDaemon
    const taskIds: string[] = []

    beforeAll(async () => {
      mkdirSync(base, { mode: 0o755 })
      daemon = await startTestDaemon({
        user: who === 'root' ? undefined : 'unprivileged',
        env: { PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_KILL_GRACE: '500ms' },
      })
    })

    afterAll(async () => {
      try {
        await waitFor(
          'no process of any everyday task left',
          () => taskIds.every((id) => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0),
          30_000,
        )
      } finally {
        await daemon?.stop()
        rmSync(base, { recursive: true, force: true })
      }
    })

    /** A fresh folder owned by `owner`, as a user's project folder would be. */
    function folder(name: string, owner: { uid: number; gid: number }): string {
      const dir = join(base, `${name}-${randomBytes(3).toString('hex')}`)
      mkdirSync(dir, { mode: 0o755 })
      chownTree(dir, owner)
      return dir
    }

    async function run(line: string, cwd: string, options: Partial<StartOptions> = {}): Promise<{ task: Task; output: string }> {
      const started = await daemon.client.start({ command: line, shell: true, cwd, timeoutMs: TASK_TIMEOUT_MS, ...options })
      taskIds.push(started.id)
      const task = await daemon.client.wait(started.id, { timeoutMs: TASK_TIMEOUT_MS + 30_000 })
      const output = (await daemon.client.read(started.id)).data
      expect(task.sandbox, output).toBe('workspace')
      return { task, output }
    }

    async function succeeds(line: string, cwd: string, options: Partial<StartOptions> = {}): Promise<string> {
      const { task, output } = await run(line, cwd, options)
      expect({ state: task.state, exitCode: task.exitCode, reason: task.reason }, output).toEqual({ state: 'exited', exitCode: 0, reason: null })
      return output
    }

    /** The folders a task writes in: the daemon's own (a root daemon's is root's), and, as root, a user's. */
    const cwdOwners: Array<{ label: string; owner: () => { uid: number; gid: number } }> =
      who === 'root'
        ? [
            { label: 'a root-owned folder', owner: () => daemonOwner },
            { label: "a user's folder", owner: () => ({ uid: user.uid, gid: user.gid }) },
          ]
        : [{ label: "the daemon user's folder", owner: () => daemonOwner }]

    for (const { label, owner } of cwdOwners) {
      describe(`in ${label}`, () => {
        test('the task does not run as uid 0 (a root daemon gives it an identity of its own)', async () => {
          const cwd = folder('id', owner())
          const output = await succeeds('id -u; id -g', cwd)
          const [uid, gid] = output.trim().split('\n').map(Number)
          if (who === 'root') {
            expect(uid, 'a root daemon runs workspace tasks on an unprivileged uid').not.toBe(0)
            expect(gid, 'and an unprivileged gid').not.toBe(0)
          } else {
            expect(uid).toBe(user.uid)
          }
        })

        test('npm ci and npm test of a real project (a local dependency, so no network is needed)', async () => {
          const cwd = folder('npm', owner())
          writeNpmProject(cwd)
          chownTree(cwd, owner())
          const output = await succeeds('npm ci --no-audit --no-fund --loglevel=error && npm test', cwd)
          expect(output).toContain('dependency answered 42')
          expectOwnedBy(cwd, owner())
        })

        test('git commit from a subfolder of a work tree', async () => {
          const repo = folder('git', owner())
          gitInit(repo)
          mkdirSync(join(repo, 'src'))
          chownTree(repo, owner())
          await succeeds(`echo change > file.txt && git add file.txt && ${GIT_COMMIT} -m 'from a task'`, join(repo, 'src'))
          expect(hostGit(repo, ['log', '--format=%s'])).toContain('from a task')
          expect(hostGit(repo, ['--no-optional-locks', 'status', '--porcelain'])).toBe('')
          expectOwnedBy(repo, owner())
        })

        test('git commit in a linked worktree the operator declared writable', async () => {
          const dir = folder('worktree', owner())
          const repo = join(dir, 'repo')
          mkdirSync(repo)
          gitInit(repo)
          hostGit(repo, ['worktree', 'add', '-q', '-b', 'feature', join(dir, 'linked')])
          chownTree(dir, owner())
          // The operator names the main repository's git folder: a .git file in the worktree is never followed.
          await succeeds(`echo feature > feature.txt && git add feature.txt && ${GIT_COMMIT} -m 'in the linked worktree'`, join(dir, 'linked'), {
            writablePaths: [join(repo, '.git')],
          })
          expect(hostGit(repo, ['log', 'feature', '--format=%s'])).toContain('in the linked worktree')
          expectOwnedBy(dir, owner())
        })

        test('python3 -m venv, then the venv runs', async () => {
          const cwd = folder('venv', owner())
          const output = await succeeds('python3 -m venv venv && venv/bin/python -c "import sys; print(sys.prefix)"', cwd)
          expect(output.trim()).toBe(join(cwd, 'venv'))
          expectOwnedBy(cwd, owner())
        })

        test('a C build with cc, then the program runs', async () => {
          const cwd = folder('cc', owner())
          writeFileSync(join(cwd, 'hello.c'), '#include <stdio.h>\nint main(void) { puts("built and ran"); return 0; }\n')
          chownTree(cwd, owner())
          const output = await succeeds('cc -O2 -o hello hello.c && ./hello', cwd)
          expect(output).toContain('built and ran')
          expectOwnedBy(cwd, owner())
        })
      })
    }

    test(`a ${BUILD_PROCESSES}-process parallel build fits under the default process limit`, async () => {
      const cwd = folder('build', daemonOwner)
      // Each job blocks opening the FIFO until the test, having seen every job running at once, opens it too.
      const jobs = Array.from({ length: BUILD_PROCESSES }, (_, index) => `j${index}`)
      writeFileSync(join(cwd, 'Makefile'), `.PHONY: all ${jobs.join(' ')}\nall: ${jobs.join(' ')}\n${jobs.map((job) => `${job}:\n\t@cat go.fifo\n`).join('')}`)
      execFileSync('mkfifo', [join(cwd, 'go.fifo')])
      chownTree(cwd, daemonOwner)
      const started = await daemon.client.start({
        command: `make -s -j${BUILD_PROCESSES} all && echo build done`,
        shell: true,
        cwd,
        timeoutMs: TASK_TIMEOUT_MS,
      })
      taskIds.push(started.id)
      await waitFor(
        `${BUILD_PROCESSES} build jobs running at once (task ${started.id})`,
        async () => {
          const current = await daemon.client.get(started.id)
          if (current.state !== 'running' && current.state !== 'queued')
            throw new Error(`the build ended early: ${current.state} ${current.reason}: ${(await daemon.client.read(started.id)).data.slice(-2000)}`)
          return jobsRunning(started.id) >= BUILD_PROCESSES
        },
        90_000,
      )
      // Every job is blocked in open(): one writer lets them all read end-of-file and finish.
      closeSync(openSync(join(cwd, 'go.fifo'), 'w'))
      const task = await daemon.client.wait(started.id, { timeoutMs: 60_000 })
      const output = (await daemon.client.read(started.id)).data
      expect({ state: task.state, exitCode: task.exitCode }, output.slice(-2000)).toEqual({ state: 'exited', exitCode: 0 })
      expect(output).toContain('build done')
    })
  })
}

const GIT_COMMIT = 'git -c user.name=Agent -c user.email=agent@example.invalid commit -q'

/** The build's jobs alive now: `cat` processes carrying the task's marker. */
function jobsRunning(taskId: string): number {
  return processesWithEnv(`TEND_TASK_ID=${taskId}`).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'cat'
    } catch {
      return false
    }
  }).length
}

/** A project with a dependency in the project itself, so `npm ci` installs it without a registry. */
function writeNpmProject(dir: string): void {
  mkdirSync(join(dir, 'vendor', 'dep'), { recursive: true })
  writeFileSync(join(dir, 'vendor', 'dep', 'package.json'), JSON.stringify({ name: 'dep', version: '1.0.0', main: 'index.js' }))
  writeFileSync(join(dir, 'vendor', 'dep', 'index.js'), 'module.exports = 42\n')
  writeFileSync(join(dir, 'test.js'), "const answer = require('dep')\nif (answer !== 42) process.exit(1)\nconsole.log(`dependency answered ${answer}`)\n")
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: 'everyday', version: '1.0.0', private: true, dependencies: { dep: 'file:vendor/dep' }, scripts: { test: 'node test.js' } }),
  )
  execFileSync('npm', ['install', '--package-lock-only', '--offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, stdio: 'pipe' })
}

function gitInit(dir: string): void {
  hostGit(dir, ['init', '-q', '-b', 'main'])
  writeFileSync(join(dir, 'README'), 'a project\n')
  hostGit(dir, ['add', 'README'])
  hostGit(dir, ['-c', 'user.name=Host', '-c', 'user.email=host@example.invalid', 'commit', '-q', '-m', 'initial'])
}

/** git run by the test on the host (as root, in folders that may belong to another user). */
function hostGit(dir: string, args: string[]): string {
  return execFileSync('git', ['-c', 'safe.directory=*', ...args], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
}

/** Everything in the folder, what the task made included, belongs to the folder's owner on the host. */
function expectOwnedBy(dir: string, owner: { uid: number; gid: number }): void {
  const owners = new Map<string, string>()
  const walk = (path: string) => {
    const info = lstatSync(path)
    const key = `${info.uid}:${info.gid}`
    if (!owners.has(key)) owners.set(key, path)
    if (info.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name))
  }
  walk(dir)
  expect(Object.fromEntries(owners), `owners of what is in ${dir}`).toEqual({ [`${owner.uid}:${owner.gid}`]: dir })
}

defineEverydayWork('root')
defineEverydayWork('non-root')
