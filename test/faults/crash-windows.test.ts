import { afterEach, describe, expect, test } from 'vitest'
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import type { Task } from '../../client/index.js'
import type { RunningTask } from '../../protocol/index.js'
import { runCli } from '../helpers/cli.js'
import { createTempHome, FIXTURES, killEverythingOf, startTestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { holdsPidfdOf, isAlive, processesWithEnv, spawnerHelperOf } from '../helpers/processes.js'
import { daemonCgroupFolder } from '../../daemon/sandbox/cgroup-parent.js'

/*
 * Crash windows: a daemon SIGKILLed at the worst moment, then a new one on the same home. What it
 * records is checked against what happened, seen from outside (files the tasks wrote, /proc,
 * cgroups), never against what the daemon believes.
 */

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

/** A home whose daemons are crashed: whatever is left of it goes after the test. */
function crashHome(): string {
  const home = createTempHome()
  cleanups.push(async () => {
    await killEverythingOf(home)
    rmSync(home, { recursive: true, force: true })
  })
  return home
}

function scratchFolder(): string {
  const folder = mkdtempSync(join(tmpdir(), 'tend-crash-'))
  cleanups.push(() => rmSync(folder, { recursive: true, force: true }))
  return folder
}

/** The record on disk, as the spool holds it. */
function recordOnDisk(home: string, id: string): Task {
  return JSON.parse(readFileSync(join(home, 'spool', id, 'task.json'), 'utf8')) as Task
}

describe('SIGKILL right after a burst of submissions', () => {
  test('every task that ran is recorded as it ended (exited 0, wait exits 0), and no task still running is killed by the next daemon', async () => {
    let caughtRunning = 0
    for (let round = 0; round < 3 && caughtRunning === 0; round++) {
      const home = crashHome()
      const seen = scratchFolder()
      const daemon = await startTestDaemon({ home, env: { TEND_CONCURRENCY: '24', TEND_PER_OWNER_CONCURRENCY: '24' } })
      // Every rename by the daemon (a record put in place) is held 250 ms: a task's running record,
      // written after its start, then lands well after the task began. The daemon is killed the
      // moment one more task has begun (while another has ended already): its record still says queued.
      const tracer = await slowSyscalls(daemon.process.pid!, 'rename,renameat,renameat2', 250_000)
      const watcher = execa(process.execPath, [join(FIXTURES, 'kill-when-task-begins.mjs'), String(daemon.process.pid), seen, '60000'], { reject: false })
      // Half end at once, half run on past the crash; each leaves a file when it begins and when it ends.
      const quick = 'touch "$SEEN/$TEND_TASK_ID.began"; touch "$SEEN/$TEND_TASK_ID.ended"'
      const slow = 'touch "$SEEN/$TEND_TASK_ID.began"; sleep 3; touch "$SEEN/$TEND_TASK_ID.ended"'
      const submissions = Array.from({ length: 24 }, (_, index) =>
        daemon.client.start({ command: [index % 2 === 0 ? quick : slow], shell: true, env: { SEEN: seen } }).catch(() => null),
      )
      expect((await watcher).exitCode, 'the daemon was not killed as a task began').toBe(0)
      await daemon.crash()
      await tracer.gone
      daemon.client.close()
      // The answered tasks, and every other task whose record landed (its answer was cut by the crash).
      const answered = (await Promise.all(submissions)).filter((task) => task !== null)
      const ids = readdirSync(join(home, 'spool')).filter((id) => existsSync(join(home, 'spool', id, 'task.json')))
      expect(ids).toEqual(expect.arrayContaining(answered.map((task) => task.id)))
      const stillQueuedOnDisk = ids.filter((id) => recordOnDisk(home, id).state === 'queued' && existsSync(join(seen, `${id}.began`)))
      const runningAtCrash = stillQueuedOnDisk.filter((id) => !existsSync(join(seen, `${id}.ended`)))
      caughtRunning += runningAtCrash.length

      const next = await startTestDaemon({ home })
      cleanups.push(() => next.stop())
      const ended = await Promise.all(ids.map((id) => next.client.wait(id, { timeoutMs: 60_000 })))
      for (const task of ended) {
        if (!existsSync(join(seen, `${task.id}.began`))) {
          // Never started (no process of it ever ran): failed, and nothing of it ran later.
          expect(task, `${task.id} never began`).toMatchObject({ state: 'failed' })
          continue
        }
        expect(existsSync(join(seen, `${task.id}.ended`)), `${task.id} began but was killed before it ended (recorded ${task.state}: ${task.reason})`).toBe(
          true,
        )
        expect(task, `${task.id} ran to its end`).toMatchObject({ state: 'exited', exitCode: 0 })
      }
      if (stillQueuedOnDisk.length > 0) {
        const cli = await runCli(['wait', stillQueuedOnDisk[0]!], next.env)
        expect(cli.exitCode, cli.stderr).toBe(0)
      }
      await next.stop()
    }
    // The window this test is about: tasks that ran while their record still said queued.
    expect(caughtRunning, 'no round caught a task running while its record still said queued').toBeGreaterThan(0)
  }, 240_000)
})

/** Every temporary file a record write leaves while it is under way, by task folder. */
function temporaryFiles(home: string): string[] {
  const spool = join(home, 'spool')
  const found: string[] = []
  for (const id of readdirSync(spool)) {
    let names: string[] = []
    try {
      names = readdirSync(join(spool, id))
    } catch {
      continue
    }
    for (const name of names) if (name.endsWith('.tmp')) found.push(join(id, name))
  }
  return found
}

describe('SIGKILL during concurrent submissions', () => {
  test('a creation that never finished is cleaned up, not quarantined as corrupt; no temporary file outlives recovery; every answered submission is kept (3 rounds)', async () => {
    const home = crashHome()
    let caught = 0
    for (let round = 0; round < 3; round++) {
      const daemon = await startTestDaemon({ home })
      // Killed, from another process, the moment a record is half written (its temporary file there, not renamed yet).
      const watcher = execa(process.execPath, [join(FIXTURES, 'kill-on-temporary-file.mjs'), String(daemon.process.pid), join(home, 'spool'), '20000'], {
        reject: false,
      })
      const submissions = Array.from({ length: 40 }, () =>
        daemon.client.start({ command: ['true'] }).then(
          (task) => task.id,
          () => null,
        ),
      )
      if ((await watcher).exitCode === 0) caught += 1
      await daemon.crash()
      const answered = (await Promise.all(submissions)).filter((id): id is string => id !== null)
      daemon.client.close()

      const next = await startTestDaemon({ home })
      const listed = await next.client.list({ all: true })
      const corrupt = listed.filter((task) => task.state === 'corrupt')
      expect(
        corrupt.map((task) => `${task.id}: ${task.reason}`),
        `round ${round}`,
      ).toEqual([])
      expect(temporaryFiles(home), `round ${round}`).toEqual([])
      // Every folder left is a task; every submission that was answered is one of them.
      for (const id of readdirSync(join(home, 'spool'))) expect(existsSync(join(home, 'spool', id, 'task.json')), `${id} has no record`).toBe(true)
      expect(listed.map((task) => task.id)).toEqual(expect.arrayContaining(answered))
      await Promise.all(listed.map((task) => next.client.wait(task.id, { timeoutMs: 30_000 })))
      await next.crash()
      next.client.close()
    }
    expect(caught, 'no round caught a record half written').toBeGreaterThan(0)
  }, 180_000)
})

describe('helper loss', () => {
  test('the spawner helper SIGKILLed 7 times (some the moment they were there): the healthy task runs on and is recorded as it ended', async () => {
    const seen = scratchFolder()
    const daemon = await startTestDaemon()
    cleanups.push(() => daemon.stop())
    const release = join(seen, 'release')
    const task = await daemon.client.start({ command: [`while [ ! -e '${release}' ]; do sleep 0.05; done; echo done`], shell: true })
    const running = await waitFor('task running with a keeper', async () => {
      const current = await daemon.client.get(task.id)
      return current.state === 'running' && current.keeper ? current : null
    })
    const daemonPid = daemon.process.pid!
    // Some helpers die once they have attached again, some as soon as they are there (before or while they attach).
    const kills: Array<'started' | 'attached' | 'at once'> = ['started', 'attached', 'at once', 'at once', 'attached', 'attached', 'at once']
    for (const [index, when] of kills.entries()) {
      const death = index + 1
      const helper = await waitFor(`helper ${death} watching the keeper ${running.keeper!.pid}`, async () => {
        const current = await daemon.client.get(task.id)
        if (current.state !== 'running') throw new Error(`the task was recorded ${current.state}: ${current.reason}`)
        const pid = spawnerHelperOf(daemonPid)
        // The first helper started the task (it hears of its end on the keeper's report pipe); later ones attached by pidfd.
        return pid !== null && (when !== 'attached' || holdsPidfdOf(pid, running.keeper!.pid)) ? pid : null
      })
      process.kill(helper, 'SIGKILL')
      await waitFor(`helper ${helper} gone`, () => !existsSync(`/proc/${helper}`) || readFileSync(`/proc/${helper}/stat`, 'utf8').includes(') Z'))
    }
    await waitFor('a last helper watching the keeper', () => {
      const pid = spawnerHelperOf(daemonPid)
      return pid !== null && holdsPidfdOf(pid, running.keeper!.pid)
    })
    expect((await daemon.client.get(task.id)).state).toBe('running')
    writeFileSync(release, '')
    const ended = await daemon.client.wait(task.id, { timeoutMs: 30_000 })
    expect(ended, ended.reason ?? '').toMatchObject({ state: 'exited', exitCode: 0 })
    expect((await daemon.client.read(task.id)).data).toBe('done\n')
  }, 120_000)
})

/** Bytes that never repeat within an input, so that a piece out of place shows. */
function patternedBytes(length: number, seed: number): Buffer {
  const bytes = Buffer.alloc(length)
  let state = seed
  for (let index = 0; index < length; index++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0
    bytes[index] = state >>> 24
  }
  return bytes
}

/**
 * Traces `pid` (every thread) with strace, holding each of `syscalls` (of `path` only, when given)
 * for `delayUs` before it runs; resolves once every thread is traced, with a promise that settles
 * when the tracer has gone (with its tracee).
 */
async function slowSyscalls(pid: number, syscalls: string, delayUs: number, path?: string): Promise<{ gone: Promise<unknown> }> {
  const only = path === undefined ? [] : ['-P', path]
  const strace = execa(
    'strace',
    ['-f', '-qq', '-p', String(pid), ...only, '-e', `trace=${syscalls}`, '-e', `inject=${syscalls}:delay_enter=${delayUs}`, '-o', '/dev/null'],
    { reject: false },
  )
  cleanups.push(() => {
    strace.kill('SIGKILL')
  })
  const traced = () => readdirSync(`/proc/${pid}/task`).every((tid) => !/^TracerPid:\s+0$/m.test(readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8')))
  await waitFor(`strace tracing every thread of ${pid} (strace must be installed: apt-get install strace)`, async () => {
    if (strace.exitCode !== null) throw new Error(`strace exited: ${(await strace).stderr}`)
    return traced()
  })
  return { gone: strace.then(() => undefined) }
}

describe('SIGKILL during a stream of stdin input', () => {
  test('input.log holds every byte the task received, in order (3 rounds, a 614,400-byte input each)', async () => {
    for (let round = 0; round < 3; round++) {
      const home = crashHome()
      const seen = scratchFolder()
      const received = join(seen, 'received')
      const daemon = await startTestDaemon({ home })
      const task = await daemon.client.start({ command: [`cat > '${received}'`], shell: true, stdin: 'pipe' })
      await waitFor('task running', async () => (await daemon.client.get(task.id)).state === 'running')
      // Every open of input.log by the daemon is held 150 ms (strace's fault injection): a crash
      // comes while one is under way, between what reached the pipe and what reached the log.
      const tracer = await slowSyscalls(daemon.process.pid!, 'openat', 150_000, join(home, 'spool', task.id, 'input.log'))
      const data = patternedBytes(614_400, round + 1)
      const watcher = execa(process.execPath, [join(FIXTURES, 'kill-when-file-grows.mjs'), String(daemon.process.pid), received, String(200 * 1024), '20000'], {
        reject: false,
      })
      const sent = daemon.client.input(task.id, data).catch(() => null)
      expect((await watcher).exitCode, 'the daemon was not killed mid-stream').toBe(0)
      await daemon.crash()
      await tracer.gone
      await sent
      daemon.client.close()

      const next = await startTestDaemon({ home })
      cleanups.push(() => next.stop())
      await waitFor(`task ${task.id} supervised again`, async () => (await next.client.get(task.id)).state === 'running')
      // What was in the pipe is read by now or soon: the task ends on end of input once it has read it all.
      await next.client.input(task.id, Buffer.alloc(0), { eof: true })
      const ended = await next.client.wait(task.id, { timeoutMs: 30_000 })
      expect(ended).toMatchObject({ state: 'exited', exitCode: 0 })
      const got = readFileSync(received)
      const logged = readFileSync(join(home, 'spool', task.id, 'input.log'))
      expect(got.length, `round ${round}: the task got ${got.length} bytes, input.log holds ${logged.length}`).toBeLessThanOrEqual(logged.length)
      expect(logged.subarray(0, got.length).equals(got), `round ${round}: input.log does not begin with what the task got`).toBe(true)
      expect(data.subarray(0, logged.length).equals(logged), `round ${round}: input.log is not what was sent`).toBe(true)
    }
  }, 180_000)
})

/** The task's pids cgroup, where a root daemon on this home makes it. */
function pidsGroupOf(home: string, id: string): string {
  return join('/sys/fs/cgroup/pids/tend', String(process.getuid!()), daemonCgroupFolder(home), id)
}

/** Live processes carrying the task's marker. */
function markedProcesses(id: string): number[] {
  return processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive)
}

describe('a corrupt entry, or a folder gone, with processes still running', () => {
  test('recovery stops what runs of a corrupt entry and of a task whose folder is gone, removes their cgroups, and rm leaves nothing', async () => {
    const home = crashHome()
    const daemon = await startTestDaemon({ home })
    // A leader and a child of its own (which survives the leader, as an escapee would).
    const tree = 'sleep 300 & sleep 300'
    const corrupted = await daemon.client.start({ command: [tree], shell: true })
    const vanished = await daemon.client.start({ command: [tree], shell: true })
    for (const task of [corrupted, vanished]) {
      await waitFor(
        `${task.id} recorded running with both processes`,
        () => recordOnDisk(home, task.id).state === 'running' && markedProcesses(task.id).length >= 2,
      )
      expect(existsSync(pidsGroupOf(home, task.id)), `${task.id} has no pids cgroup: this test needs cgroup v1 pids (root)`).toBe(true)
    }
    await daemon.crash()
    daemon.client.close()
    writeFileSync(join(home, 'spool', corrupted.id, 'task.json'), '{"truncated":')
    rmSync(join(home, 'spool', vanished.id), { recursive: true })

    const next = await startTestDaemon({ home })
    cleanups.push(() => next.stop())
    expect(await next.client.get(corrupted.id)).toMatchObject({ state: 'corrupt' })
    for (const task of [corrupted, vanished]) {
      await waitFor(`no process of ${task.id} left`, () => markedProcesses(task.id).length === 0)
      await waitFor(`the cgroup of ${task.id} removed`, () => !existsSync(pidsGroupOf(home, task.id)))
    }
    const removed = await runCli(['rm', corrupted.id], next.env)
    expect(removed.exitCode, removed.stderr).toBe(0)
    expect(existsSync(join(home, 'spool', corrupted.id))).toBe(false)
    expect(markedProcesses(corrupted.id)).toEqual([])
  }, 60_000)
})

describe('a started task whose record still says queued', () => {
  for (const sandbox of ['off', 'workspace'] as const) {
    test(`sandbox ${sandbox}: the next daemon finds its keeper, supervises it again, and records it as it ends`, async () => {
      const home = crashHome()
      // Outside /tmp (a sandbox has its own), open to the uid a sandboxed task runs on.
      const workspace = mkdtempSync('/var/tmp/tend-crash-')
      chmodSync(workspace, 0o777)
      cleanups.push(() => rmSync(workspace, { recursive: true, force: true }))
      const daemon = await startTestDaemon({ home })
      const task = await daemon.client.start({ command: ['while [ ! -e release ]; do sleep 0.05; done; echo released'], shell: true, sandbox, cwd: workspace })
      await waitFor(`${task.id} recorded running`, () => recordOnDisk(home, task.id).state === 'running')
      const running = recordOnDisk(home, task.id) as RunningTask
      await daemon.crash()
      daemon.client.close()
      // The record as it was before its running version landed.
      const queued: Record<string, unknown> = { ...running, state: 'queued', pid: null, startedAt: null }
      for (const field of ['keeper', 'bootId', 'ranAs']) delete queued[field]
      writeFileSync(join(home, 'spool', task.id, 'task.json'), `${JSON.stringify(queued, null, 2)}\n`)

      const next = await startTestDaemon({ home })
      cleanups.push(() => next.stop())
      const resumed = await next.client.get(task.id)
      expect(resumed, resumed.reason ?? '').toMatchObject({ state: 'running', pid: running.pid })
      expect((resumed as RunningTask).keeper).toEqual(running.keeper)
      writeFileSync(join(workspace, 'release'), '')
      const ended = await next.client.wait(task.id, { timeoutMs: 30_000 })
      expect(ended, ended.reason ?? '').toMatchObject({ state: 'exited', exitCode: 0 })
      expect((await next.client.read(task.id)).data).toBe('released\n')
    }, 60_000)
  }
})

describe('temporary files a dead daemon or keeper left', () => {
  test('a half-written record, lease and exit file beside a task are gone after the next start; the task is kept', async () => {
    const home = crashHome()
    const daemon = await startTestDaemon({ home })
    const task = await daemon.client.start({ command: ['true'] })
    await daemon.client.wait(task.id, { timeoutMs: 20_000 })
    await daemon.crash()
    daemon.client.close()
    const folder = join(home, 'spool', task.id)
    // An exit file's temporary names a keeper that is gone: a pid no process has (past pid_max).
    const planted = ['task.json.4242-7.tmp', 'lease.4242.tmp', `exit.json.${Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8')) + 1}.tmp`]
    for (const name of planted) writeFileSync(join(folder, name), '{"half":')
    const next = await startTestDaemon({ home })
    cleanups.push(() => next.stop())
    expect(await next.client.get(task.id)).toMatchObject({ state: 'exited', exitCode: 0 })
    expect(readdirSync(folder).filter((name) => name.endsWith('.tmp'))).toEqual([])
  }, 60_000)
})
