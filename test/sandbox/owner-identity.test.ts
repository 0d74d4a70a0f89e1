import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { randomBytes } from 'node:crypto'
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { StartOptions, Task } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { eachSandboxedProfile } from '../helpers/profiles.js'
import { createTempHome, killEverythingOf, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * Each owner's tasks on a uid of their own (a root daemon's): the kernel counts inotify instances,
 * pending signals, message queue bytes, keys, user namespaces and processes per uid, so tasks of
 * two owners on one uid share those budgets, and one owner's task could use them up for every
 * other owner. Checked with real tasks: one owner's task exhausts its uid's inotify instances and
 * pending signals (seen from the host in /proc), then another owner's task watches a folder and
 * runs `timeout`, which makes a POSIX timer (a queued signal).
 *
 * Everything lives under /var/tmp (a sandboxed task has a private /tmp), in a folder others may
 * enter (0711): the tasks' uids must reach their cwd.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
const PYTHON = '/usr/bin/python3'
/** The range task identities are chosen in (docs/sandbox.md). */
const TASK_ID_FIRST = 1879048192
const TASK_ID_LAST = 2147483646

/**
 * Takes every inotify instance and every pending signal its uid has left, says how many and why it
 * stopped, then holds them (sleeping, blocked signals pending) until it is killed.
 */
const HOG_PY = `import ctypes, errno, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
instances = 0
while libc.inotify_init1(0o2000000) >= 0:
    instances += 1
print('inotify', instances, errno.errorcode.get(ctypes.get_errno()), flush=True)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})
queued = 0
while libc.sigqueue(os.getpid(), int(signal.SIGRTMIN), ctypes.c_void_p(0)) == 0:
    queued += 1
print('signals', queued, errno.errorcode.get(ctypes.get_errno()), flush=True)
print('ready', flush=True)
time.sleep(600)
`

/** Watches its cwd (an inotify instance), runs timeout (a POSIX timer), and says how each went. */
const USE_BUDGETS = [
  'id -u',
  `node -e "try { require('fs').watch('.').close(); console.log('watch ok') } catch (error) { console.log('watch failed:', error.code) }"`,
  'timeout 1 true 2>&1',
  'echo "timeout exited $?"',
].join('; ')

describe('each owner its own task uid, daemon as root', () => {
  const base = join('/var/tmp', `tend-owner-ids-${process.pid}-${randomBytes(4).toString('hex')}`)
  const hogPy = join(base, 'probes', 'hog.py')
  let daemon: TestDaemon
  const taskIds: string[] = []

  beforeAll(async () => {
    mkdirSync(join(base, 'probes'), { recursive: true, mode: 0o755 })
    chmodSync(base, 0o711)
    chmodSync(join(base, 'probes'), 0o755)
    writeFileSync(hogPy, HOG_PY, { mode: 0o644 })
    daemon = await startTestDaemon({ env: { PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_KILL_GRACE: '500ms' } })
  })

  afterAll(async () => {
    try {
      await waitFor('no process of any owner-identity task left', () =>
        taskIds.every((id) => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0),
      )
    } finally {
      await daemon?.stop()
      rmSync(base, { recursive: true, force: true })
    }
  })

  function folder(): string {
    const dir = mkdtempSync(join(base, 'ws-'))
    chmodSync(dir, 0o755)
    return dir
  }

  async function attempt(line: string, options: Partial<StartOptions>): Promise<{ task: Task; output: string }> {
    const started = await daemon.client.start({ command: line, shell: true, cwd: folder(), timeoutMs: 30_000, ...options })
    taskIds.push(started.id)
    const task = await daemon.client.wait(started.id, { timeoutMs: 45_000 })
    return { task, output: (await daemon.client.read(started.id)).data }
  }

  /** The hog's python process as the host sees it: its uid, its queued signals and limit, its inotify descriptors. */
  function hostView(taskId: string): { uid: number; sigq: [number, number]; inotify: number } {
    const pid = processesWithEnv(`TEND_TASK_ID=${taskId}`)
      .filter(isAlive)
      .find((each) => readFileSync(`/proc/${each}/cmdline`, 'utf8') === `${PYTHON}\0${hogPy}\0`)
    expect(pid, `the hog of task ${taskId} on the host`).toBeDefined()
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const uid = Number(/^Uid:\s+(\d+)/m.exec(status)![1])
    const [queued, limit] = /^SigQ:\s+(\d+)\/(\d+)/m.exec(status)!.slice(1).map(Number) as [number, number]
    const inotify = readdirSync(`/proc/${pid}/fd`).filter((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`) === 'anon_inode:inotify'
      } catch {
        return false
      }
    }).length
    return { uid, sigq: [queued, limit], inotify }
  }

  eachSandboxedProfile(
    "one owner's task that uses up its uid's inotify instances and pending signals leaves another owner's fs.watch and timeout working",
    () => daemon.client,
    async (sandbox) => {
      const alice = `alice-${sandbox}`
      const bob = `bob-${sandbox}`
      const hog = await daemon.client.start({ command: [PYTHON, hogPy], cwd: folder(), sandbox, owner: alice, timeoutMs: 120_000 })
      taskIds.push(hog.id)
      const said = await waitFor(
        `task ${hog.id} to hold its uid's budgets`,
        async () => {
          const { data } = await daemon.client.read(hog.id)
          if (!['queued', 'running'].includes((await daemon.client.get(hog.id)).state)) throw new Error(`the hog ended: ${data}`)
          return data.includes('ready\n') ? data : null
        },
        30_000,
      )
      try {
        const [, instances, instancesStop] = /^inotify (\d+) (\w+)$/m.exec(said)!
        const [, queued, queuedStop] = /^signals (\d+) (\w+)$/m.exec(said)!
        expect({ instancesStop, queuedStop }, said).toEqual({ instancesStop: 'EMFILE', queuedStop: 'EAGAIN' })
        // From the host: the hog holds the instances and the queued signals it counted.
        const seen = hostView(hog.id)
        expect(seen.inotify).toBe(Number(instances))
        expect(seen.inotify).toBeGreaterThan(0)
        expect(seen.sigq[0], 'SigQ of the hog').toBe(Number(queued))
        expect(Number(queued)).toBeGreaterThan(0)
        expect(seen.uid).toBeGreaterThanOrEqual(TASK_ID_FIRST)
        expect(seen.uid).toBeLessThanOrEqual(TASK_ID_LAST)

        // The same owner's next task has nothing left: what the attack takes is real.
        const same = await attempt(USE_BUDGETS, { sandbox, owner: alice })
        expect(same.output).toContain('watch failed: EMFILE\n')
        expect(same.output).toContain('timer_create')
        expect(same.output.split('\n')[0]).toBe(String(seen.uid))

        // Another owner's task has its own budgets, on a uid of its own.
        const other = await attempt(USE_BUDGETS, { sandbox, owner: bob })
        expect(other.task.state, other.output).toBe('exited')
        const bobUid = Number(other.output.split('\n')[0])
        expect(other.output).toBe(`${bobUid}\nwatch ok\ntimeout exited 0\n`)
        expect(bobUid).not.toBe(seen.uid)
        expect(bobUid).toBeGreaterThanOrEqual(TASK_ID_FIRST)
        expect(bobUid).toBeLessThanOrEqual(TASK_ID_LAST)

        // Recorded on each task, and listed by status per owner.
        expect('ranAs' in same.task && same.task.ranAs).toEqual({ uid: seen.uid, gid: seen.uid, identity: 'task', keyring: 'own' })
        expect('ranAs' in other.task && other.task.ranAs).toEqual({ uid: bobUid, gid: bobUid, identity: 'task', keyring: 'own' })
        const identity = (await daemon.client.status()).sandbox.identity
        expect(identity).toMatchObject({ as: 'task', uid: null, gid: null, range: { first: TASK_ID_FIRST, last: TASK_ID_LAST }, fallback: null })
        expect(identity.owners).toEqual(
          expect.arrayContaining([
            { owner: alice, uid: seen.uid, gid: seen.uid },
            { owner: bob, uid: bobUid, gid: bobUid },
          ]),
        )
        const text = (await runCli(['status'], daemon.env)).stdout
        expect(text).toContain(`${alice} ${seen.uid}`)
        expect(text).toContain(`${bob} ${bobUid}`)
      } finally {
        await daemon.client.kill(hog.id, { graceMs: 0 })
      }
    },
    120_000,
  )

  test("after a restart, an owner whose task still runs keeps that task's uid for its next tasks", async () => {
    const home = createTempHome()
    const env = { PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_KILL_GRACE: '500ms' }
    const first = await startTestDaemon({ home, env })
    let second: TestDaemon | undefined
    try {
      const staying = await first.client.start({
        command: 'id -u; echo ready; exec sleep 120',
        shell: true,
        cwd: folder(),
        sandbox: 'workspace',
        owner: 'carol',
        timeoutMs: 120_000,
      })
      taskIds.push(staying.id)
      const running = await waitFor('the running record, with its keeper and identity, on disk', () => {
        const record = JSON.parse(readFileSync(join(home, 'spool', staying.id, 'task.json'), 'utf8')) as {
          state: string
          keeper?: unknown
          ranAs?: { uid: number }
        }
        return record.state === 'running' && record.keeper ? record : undefined
      })
      const uid = running.ranAs!.uid
      await waitFor(`task ${staying.id} to print ready`, async () => (await first.client.read(staying.id)).data === `${uid}\nready\n`)
      // The daemon dies; the task runs on under its keeper, on carol's uid, and the next daemon takes it over.
      await first.crash()
      first.client.close()
      second = await startTestDaemon({ home, env })
      await waitFor(`task ${staying.id} supervised again`, async () => (await second!.client.get(staying.id)).state === 'running')
      const next = await second.client.start({ command: 'id -u', shell: true, cwd: folder(), sandbox: 'workspace', owner: 'carol', timeoutMs: 30_000 })
      taskIds.push(next.id)
      await second.client.wait(next.id, { timeoutMs: 45_000 })
      expect((await second.client.read(next.id)).data).toBe(`${uid}\n`)
      expect((await second.client.status()).sandbox.identity.owners).toContainEqual({ owner: 'carol', uid, gid: uid })
      await second.client.kill(staying.id, { graceMs: 0 })
    } finally {
      if (second) await second.stop()
      else {
        await killEverythingOf(home)
        rmSync(home, { recursive: true, force: true })
      }
    }
  })
})
