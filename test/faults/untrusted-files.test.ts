import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { randomBytes } from 'node:crypto'
import {
  chmodSync,
  closeSync,
  constants,
  existsSync,
  lchownSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
} from 'node:fs'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { isTendError, type StartOptions, type Task, type TendClient } from '../../client/index.js'
import { NativeSpawner } from '../../daemon/spawn/native-spawner.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { rawRequest } from '../helpers/raw-http.js'
import { spawnRequest } from '../helpers/spawn-request.js'
import { checkUnprivilegedUser, killEverythingOf, startTestDaemon, type TestDaemon, type TestDaemonOptions } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * The daemon never blocks on a file a task owns (issue 24, findings 1 and 5): a FIFO where it reads
 * (a git folder's commondir, an exit file, a lease file, output.log), a socket or a device there,
 * and a write lease on output.log. Other owners' requests must be answered meanwhile, within a
 * named timeout far below the 45 s a lease break takes.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
const PYTHON = '/usr/bin/python3'
/** How long another owner's task may take to start, run, be waited on and read while a task does its worst. */
const OTHER_OWNER_TIMEOUT_MS = 10_000
/** How long a read of a planted file may take to be answered (with data or a refusal). */
const READ_ANSWER_TIMEOUT_MS = 10_000

/** Rejects, naming what was awaited, when the promise has not settled within timeoutMs. */
async function within<T>(what: string, promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs}ms waiting for ${what}`)), timeoutMs)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

/** Wakes every reader blocked opening a FIFO (a writer comes and goes: they read end-of-file). */
function releaseFifo(path: string): void {
  try {
    closeSync(openSync(path, constants.O_WRONLY | constants.O_NONBLOCK))
  } catch {
    // no reader waiting (ENXIO), or no FIFO any more
  }
}

/** Another owner's `echo` from start to its output, as `tend run --wait -- echo` does it. */
async function otherOwnersEcho(client: TendClient, cwd: string, sandbox: StartOptions['sandbox']): Promise<string> {
  const started = await client.start({ command: ['echo', 'other owner'], owner: 'other', cwd, sandbox })
  await client.wait(started.id, { timeoutMs: OTHER_OWNER_TIMEOUT_MS })
  return (await client.read(started.id)).data
}

function defineSuite(who: 'root' | 'non-root'): void {
  describe(`files a task owns, daemon as ${who}`, () => {
    const base = join('/var/tmp', `tend-blocking-${who}-${process.pid}-${randomBytes(4).toString('hex')}`)
    const owner = who === 'root' ? { uid: 0, gid: 0 } : checkUnprivilegedUser()
    const daemonUser: TestDaemonOptions['user'] = who === 'root' ? undefined : 'unprivileged'
    let daemon: TestDaemon
    const taskIds: string[] = []

    function workspace(): string {
      const dir = mkdtempSync(join(base, 'ws-'))
      lchownSync(dir, owner.uid, owner.gid)
      // Reachable by a root daemon's sandboxed tasks, which run on a uid of their own.
      chmodSync(dir, 0o755)
      return dir
    }

    beforeAll(async () => {
      // Others may pass through (not list): a root daemon's tasks run on a uid of their own.
      mkdirSync(base, { mode: 0o711 })
      lchownSync(base, owner.uid, owner.gid)
      daemon = await startTestDaemon({ user: daemonUser, env: { PATH: SYSTEM_PATH, TEND_KILL_GRACE: '500ms' } })
    })

    afterEach(async () => {
      // A test that failed midway leaves no task running.
      for (const id of taskIds.splice(0)) {
        for (const pid of processesWithEnv(`TEND_TASK_ID=${id}`)) {
          try {
            process.kill(pid, 'SIGKILL')
          } catch {
            // already gone
          }
        }
        await waitFor(`no process of task ${id} left`, () => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0)
      }
    })

    afterAll(async () => {
      await daemon?.stop()
      rmSync(base, { recursive: true, force: true })
    })

    async function available(sandbox: StartOptions['sandbox'], context: { skip: (note: string) => void }): Promise<void> {
      const status = await daemon.client.status()
      if (sandbox && sandbox !== 'off')
        expect(status.sandbox.profiles, `${sandbox} is not available to this daemon: ${status.sandbox.missing[sandbox]}`).toContain(sandbox)
    }

    async function run(line: string, options: Partial<StartOptions> = {}): Promise<{ task: Task; output: string }> {
      const started = await daemon.client.start({ command: line, shell: true, cwd: options.cwd ?? workspace(), timeoutMs: 20_000, ...options })
      taskIds.push(started.id)
      const task = await daemon.client.wait(started.id, { timeoutMs: 40_000 })
      return { task, output: (await daemon.client.read(started.id)).data }
    }

    describe('finding 1: a git folder whose commondir is a FIFO', () => {
      for (const sandbox of ['workspace', 'strict'] as const) {
        test(`${sandbox}: the next task in that cwd is accepted, and other owners are answered meanwhile`, async (context) => {
          await available(sandbox, context)
          const cwd = workspace()
          const { output } = await run("mkdir gd && printf 'gitdir: gd\\n' > .git && mkfifo gd/commondir && echo planted", { cwd, sandbox })
          expect(output).toBe('planted\n')
          const next = daemon.newClient().start({ command: ['true'], cwd, sandbox, owner: 'same-cwd' })
          next.then(
            (task) => taskIds.push(task.id),
            () => {},
          )
          try {
            expect(
              await within("another owner's echo task (start, wait, read)", otherOwnersEcho(daemon.newClient(), workspace(), sandbox), OTHER_OWNER_TIMEOUT_MS),
            ).toBe('other owner\n')
            const accepted = await within('the task in the cwd with the FIFO to be accepted', next, OTHER_OWNER_TIMEOUT_MS)
            expect(await daemon.client.wait(accepted.id, { timeoutMs: 20_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
          } finally {
            releaseFifo(join(cwd, 'gd', 'commondir'))
            await next.catch(() => {})
          }
        })
      }
    })

    describe("finding 5: a write lease on the task's own output.log", () => {
      const LEASE = [
        'import errno, fcntl, os, signal, time',
        // A lease holder that ignores the break signal keeps every opener waiting the whole lease-break-time.
        'signal.signal(signal.SIGIO, signal.SIG_IGN)',
        'try:',
        '    fcntl.fcntl(1, 1024, fcntl.F_WRLCK)',
        "    state = 'leased'",
        'except OSError as error:',
        "    state = 'refused ' + errno.errorcode[error.errno]",
        "open('lease-state.tmp', 'w').write(state + '\\n')",
        "os.rename('lease-state.tmp', 'lease-state')",
        "while not os.path.exists('release'): time.sleep(0.05)",
      ].join('\n')

      for (const sandbox of ['off', 'workspace', 'strict'] as const) {
        test(`${sandbox}: reads of it answer at once, and another owner's echo task runs and is read meanwhile`, async (context) => {
          await available(sandbox, context)
          const cwd = workspace()
          const started = await daemon.client.start({ command: [PYTHON, '-c', LEASE], cwd, sandbox, owner: 'leaser', timeoutMs: 60_000 })
          taskIds.push(started.id)
          const state = await waitFor(
            'the task to try its lease',
            () => existsSync(join(cwd, 'lease-state')) && readFileSync(join(cwd, 'lease-state'), 'utf8'),
            20_000,
          )
          // libuv has four threads for file system calls: four reads that each wait out a lease break take them all.
          const reads = Array.from({ length: 4 }, () => daemon.newClient().read(started.id))
          for (const read of reads) read.catch(() => {})
          try {
            expect(
              await within("another owner's echo task (start, wait, read)", otherOwnersEcho(daemon.newClient(), workspace(), sandbox), OTHER_OWNER_TIMEOUT_MS),
            ).toBe('other owner\n')
            const answers = await within('the four reads of the leased output to be answered', Promise.allSettled(reads), READ_ANSWER_TIMEOUT_MS)
            for (const answer of answers)
              expect(answer.status === 'fulfilled' || isTendError(answer.reason), String((answer as PromiseRejectedResult).reason)).toBe(true)
            // The keeper holds output.log open for reading all the task's life: no write lease can be
            // had (EAGAIN). A root daemon's sandboxed task, on a uid of its own, does not even own the
            // file: a lease needs its owner (EACCES).
            const ownIdentity = sandbox !== 'off' && (await daemon.client.status()).sandbox.identity.as === 'task'
            expect(state).toBe(ownIdentity ? 'refused EACCES\n' : 'refused EAGAIN\n')
          } finally {
            // A lease dies with its holder: stuck reads (if any) then go on.
            for (const pid of processesWithEnv(`TEND_TASK_ID=${started.id}`)) {
              try {
                process.kill(pid, 'SIGKILL')
              } catch {
                // already gone
              }
            }
            await Promise.allSettled(reads)
          }
        })
      }
    })

    describe('output.log replaced by what is no file, under off', () => {
      const plants: Array<[string, string, boolean]> = [
        ['a FIFO', 'mkfifo "$f"', true],
        ['a socket', `${PYTHON} -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$f"`, true],
        ['a device', 'mknod "$f" c 1 3', who === 'root'],
      ]
      for (const [what, make, applies] of plants) {
        if (!applies) continue
        test(`${what}: reads answer at once (the task's own output while it runs, a coded error once it ended), and other owners are answered meanwhile`, async () => {
          const cwd = workspace()
          const started = await daemon.client.start({
            command: `f="$TEND_HOME/spool/$TEND_TASK_ID/output.log"; rm -f "$f" && ${make} && touch planted && while [ ! -e release ]; do sleep 0.05; done`,
            shell: true,
            cwd,
            sandbox: 'off',
            owner: 'planter',
            timeoutMs: 60_000,
          })
          taskIds.push(started.id)
          const file = join(daemon.home, 'spool', started.id, 'output.log')
          await waitFor('the task to plant its output.log', () => existsSync(join(cwd, 'planted')), 20_000)
          const reads: Array<Promise<unknown>> = [
            ...Array.from({ length: 4 }, () => daemon.newClient().read(started.id)),
            daemon.newClient().read(started.id, { tail: 10 }),
          ]
          for (const read of reads) read.catch(() => {})
          try {
            expect(
              await within("another owner's echo task (start, wait, read)", otherOwnersEcho(daemon.newClient(), workspace(), 'off'), OTHER_OWNER_TIMEOUT_MS),
            ).toBe('other owner\n')
            // Running: read through the output.log the daemon holds (the task wrote nothing), whatever is at its name.
            const answers = await within('the reads of the planted output.log to be answered', Promise.allSettled(reads), READ_ANSWER_TIMEOUT_MS)
            for (const answer of answers) expect(answer).toMatchObject({ status: 'fulfilled', value: { data: '' } })
            const download = await rawRequest(join(daemon.home, 'tend.sock'), {
              method: 'GET',
              path: `/v1/tasks/${started.id}/output.log`,
              timeoutMs: READ_ANSWER_TIMEOUT_MS,
            })
            expect(download).toMatchObject({ status: 200, text: '' })
            await daemon.client.kill(started.id)
            // Ended: read by its name, where what was planted is refused at once with a coded error.
            const late = await within(
              'the reads of the planted output.log after the end',
              Promise.allSettled([daemon.newClient().read(started.id), daemon.newClient().read(started.id, { tail: 10 })]),
              READ_ANSWER_TIMEOUT_MS,
            )
            for (const answer of late)
              expect(answer).toMatchObject({
                status: 'rejected',
                reason: { code: 'TEND_ERR_OUTPUT_MISSING', message: expect.stringContaining(what.split(' ')[1]!) },
              })
            const lateDownload = await rawRequest(join(daemon.home, 'tend.sock'), {
              method: 'GET',
              path: `/v1/tasks/${started.id}/output.log`,
              timeoutMs: READ_ANSWER_TIMEOUT_MS,
            })
            expect(lateDownload.status).toBe(410)
          } finally {
            // Reads that were stuck opening a FIFO (each opens it anew) are let go, one writer after another.
            let done = false
            void Promise.allSettled(reads).then(() => (done = true))
            await waitFor(
              'every read of the planted output.log to settle',
              () => {
                releaseFifo(file)
                return done
              },
              30_000,
            )
          }
        })
      }
    })

    describe('exit.json replaced by a FIFO, then the daemon restarted', () => {
      test('the next daemon starts, supervises the task again and records its end', async () => {
        const home = mkdtempSync(join(base, 'restart-home-'))
        let first: TestDaemon | undefined = await startTestDaemon({ user: daemonUser, home, env: { PATH: SYSTEM_PATH, TEND_KILL_GRACE: '500ms' } })
        let second: TestDaemon | undefined
        const cwd = workspace()
        try {
          const started = await first.client.start({
            command: `rm -f "$TEND_HOME/spool/$TEND_TASK_ID/exit.json"; mkfifo "$TEND_HOME/spool/$TEND_TASK_ID/exit.json" && touch planted && while [ ! -e release ]; do sleep 0.05; done`,
            shell: true,
            cwd,
            sandbox: 'off',
          })
          await waitFor('the task to plant its exit file', () => existsSync(join(cwd, 'planted')), 20_000)
          // The task runs before its record says so: a crash before that record is a start that never finished.
          const crashing = first
          await waitFor('the running record', async () => (await crashing.client.get(started.id)).state === 'running', 20_000)
          await first.crash()
          first = undefined
          second = await startTestDaemon({ user: daemonUser, home, env: { PATH: SYSTEM_PATH, TEND_KILL_GRACE: '500ms' } })
          const resumed = await second.client.get(started.id)
          expect(
            resumed,
            `${resumed.reason}; the daemon's log: ${readFileSync(join(home, 'daemon.log'), 'utf8')
              .split('\n')
              .filter((line) => line.includes(started.id))
              .join('\n')}`,
          ).toMatchObject({ state: 'running' })
          execFileSync('touch', [join(cwd, 'release')])
          expect(await second.client.wait(started.id, { timeoutMs: 20_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
        } finally {
          for (const id of existsSync(join(home, 'spool')) ? readdirSync(join(home, 'spool')) : []) releaseFifo(join(home, 'spool', id, 'exit.json'))
          await killEverythingOf(home)
          await second?.stop()
          if (!second) rmSync(home, { recursive: true, force: true })
        }
      })
    })
  })
}

describe("a lifeline keeper's lease file replaced by a FIFO", () => {
  const binary = NativeSpawner.binaryPath()
  let scratch: string
  beforeAll(() => {
    if (!binary) throw new Error('dist/native/tend-spawner is missing: run `npm run build` (it needs a C compiler)')
    scratch = realpathSync(mkdtempSync('/var/tmp/tend-keeper-fifo-'))
  })
  afterAll(() => rmSync(scratch, { recursive: true, force: true }))

  test('the keeper still ends its task the moment the helper is gone', async () => {
    const spawner = await NativeSpawner.start(binary!)
    const dir = mkdtempSync(join(scratch, 't-'))
    execFileSync('mkfifo', [join(dir, 'lease')])
    const outcome = await spawner.spawn(spawnRequest(dir, { file: '/bin/sleep', argv: ['sleep', '600'], endsWithDaemon: true }))
    if (!outcome.started || !outcome.keeper) throw new Error(`expected the task to start under a keeper, got ${JSON.stringify(outcome)}`)
    outcome.exited.catch(() => {})
    try {
      // The keeper wakes every 50 ms to look at its lease: each look is a voluntary context switch.
      const looks = () => Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(readFileSync(`/proc/${outcome.keeper!.pid}/status`, 'utf8'))![1])
      const before = looks()
      await waitFor('the keeper to keep looking at its lease (not stuck opening the FIFO)', () => looks() >= before + 4, 5000)
      process.kill(spawner.helperPid!, 'SIGKILL')
      await waitFor('the task to end with its helper', () => !isAlive(outcome.pid), 5000)
      await waitFor('its keeper to be gone', () => !isAlive(outcome.keeper!.pid), 5000)
    } finally {
      releaseFifo(join(dir, 'lease'))
      for (const pid of [outcome.pid, outcome.keeper.pid]) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {
          // already gone
        }
      }
      await spawner.close().catch(() => {})
    }
  })
})

defineSuite('root')
defineSuite('non-root')
