import { afterEach, describe, expect, test } from 'vitest'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Task } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { daemonEnv, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { isAlive, processesWithEnv, spawnerHelperOf } from '../helpers/processes.js'

/*
 * A keeper or the spawner helper that does not answer (SIGSTOPped by a hostile task, or by
 * anyone): launch, kill and stop still end, on kernel facts, within the CLI's 30 s.
 */

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

async function daemon(env: Record<string, string> = {}, home?: string): Promise<TestDaemon> {
  const started = await startTestDaemon({ env, ...(home ? { home } : {}) })
  cleanups.push(() => started.stop())
  return started
}

function workFolder(): string {
  const folder = mkdtempSync(join(tmpdir(), 'tend-stopped-keeper-'))
  cleanups.push(() => rmSync(folder, { recursive: true, force: true }))
  return folder
}

/** SIGSTOPs a process; after the test it is continued, so a failing test leaves no stopped keeper or helper behind. */
function stopProcess(pid: number): void {
  process.kill(pid, 'SIGSTOP')
  cleanups.push(() => {
    try {
      process.kill(pid, 'SIGCONT')
    } catch {
      // gone, as it should be
    }
  })
}

/** The process state letter in /proc/<pid>/stat (null: gone). */
function stateOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] ?? null
  } catch {
    return null
  }
}

async function cli(home: string, args: string[]) {
  return runCli(args, daemonEnv(home), { timeoutMs: 60_000 })
}

async function run(home: string, cwd: string, script: string): Promise<string> {
  const result = await cli(home, ['run', '--sandbox', 'off', '--cwd', cwd, '-c', script])
  expect(result.exitCode, result.stderr).toBe(0)
  return result.stdout.trim()
}

async function show(home: string, id: string): Promise<Task> {
  const result = await cli(home, ['show', id, '--json'])
  expect(result.exitCode, result.stderr).toBe(0)
  return JSON.parse(result.stdout) as Task
}

/** The task's processes (its marker), alive. */
function processesOf(id: string): number[] {
  return processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive)
}

describe('a keeper that does not answer', () => {
  test('a keeper stopped by its task before it reports the start: the task runs, and kill ends it at once', async () => {
    const tend = await daemon()
    const work = workFolder()
    const id = await run(tend.home, work, 'kill -STOP $PPID; exec sleep 300')
    const running = await waitFor(
      'the task recorded running',
      async () => {
        const task = await show(tend.home, id)
        return task.state === 'running' ? task : null
      },
      20_000,
    )
    const killed = await cli(tend.home, ['kill', id])
    expect(killed.exitCode, killed.stderr).toBe(0)
    expect((await show(tend.home, id)).state).toBe('killed')
    expect(processesOf(id)).toEqual([])
    expect(stateOf(running.pid!)).toBeNull()
  })

  test('a keeper stopped after the start: kill answers, the task is killed and no process of it is left', async () => {
    const tend = await daemon()
    const work = workFolder()
    const id = await run(tend.home, work, 'exec sleep 300')
    const task = await waitFor(
      'the task recorded running',
      async () => {
        const shown = await show(tend.home, id)
        return shown.state === 'running' && shown.keeper ? shown : null
      },
      20_000,
    )
    const keeper = task.keeper!.pid
    stopProcess(keeper)
    // Stopped as a hostile task would leave it: SIGCONT from anyone but tend would hide the fault.
    const killed = await cli(tend.home, ['kill', id])
    expect(killed.exitCode, killed.stderr).toBe(0)
    expect((await show(tend.home, id)).state).toBe('killed')
    expect(processesOf(id)).toEqual([])
  })

  test('a keeper stopped while its task runs, which then ends by itself: the exit is recorded and the slot frees', async () => {
    const tend = await daemon({ TEND_CONCURRENCY: '1', TEND_PER_OWNER_CONCURRENCY: '1' })
    const work = workFolder()
    const id = await run(tend.home, work, 'while [ ! -e go ]; do sleep 0.05; done; exit 7')
    const next = await run(tend.home, work, 'exit 8')
    const task = await waitFor(
      'the task recorded running',
      async () => {
        const shown = await show(tend.home, id)
        return shown.state === 'running' && shown.keeper ? shown : null
      },
      20_000,
    )
    stopProcess(task.keeper!.pid)
    await waitFor('the keeper stopped', () => stateOf(task.keeper!.pid) === 'T')
    writeFileSync(join(work, 'go'), '')
    const waited = await cli(tend.home, ['wait', id])
    expect(waited.exitCode, waited.stderr).toBe(7)
    expect((await cli(tend.home, ['wait', next])).exitCode).toBe(8)
  })

  test('a keeper a later daemon attached to, stopped: kill answers, the task is killed', async () => {
    const first = await startTestDaemon()
    const home = first.home
    const work = workFolder()
    const id = await run(home, work, 'exec sleep 300')
    const task = await waitFor(
      'the task recorded running',
      async () => {
        const shown = await show(home, id)
        return shown.state === 'running' && shown.keeper ? shown : null
      },
      20_000,
    )
    await first.crash()
    const next = await daemon({}, home)
    await waitFor('the task supervised again', async () => (await show(next.home, id)).state === 'running', 20_000)
    stopProcess(task.keeper!.pid)
    const killed = await cli(home, ['kill', id])
    expect(killed.exitCode, killed.stderr).toBe(0)
    expect((await show(home, id)).state).toBe('killed')
    expect(processesOf(id)).toEqual([])
  })

  test('tend stop with a keeper stopped before the start and one after: the daemon stops, nothing is left', async () => {
    const tend = await daemon()
    const work = workFolder()
    const before = await run(tend.home, work, 'kill -STOP $PPID; exec sleep 300')
    const after = await run(tend.home, work, 'exec sleep 300')
    const task = await waitFor(
      'the second task recorded running',
      async () => {
        const shown = await show(tend.home, after)
        return shown.state === 'running' && shown.keeper ? shown : null
      },
      20_000,
    )
    stopProcess(task.keeper!.pid)
    const stopped = await cli(tend.home, ['stop'])
    expect(stopped.exitCode, stopped.stderr + stopped.stdout).toBe(0)
    expect(processesOf(before)).toEqual([])
    expect(processesOf(after)).toEqual([])
  })

  test('tasks whose keepers are stopped before the start hold no slot once killed: a new task runs', async () => {
    const tend = await daemon({ TEND_CONCURRENCY: '2', TEND_PER_OWNER_CONCURRENCY: '2' })
    const work = workFolder()
    const hostile = [await run(tend.home, work, 'kill -STOP $PPID; exec sleep 300'), await run(tend.home, work, 'kill -STOP $PPID; exec sleep 300')]
    const next = await run(tend.home, work, 'exit 4')
    for (const id of hostile) {
      const killed = await cli(tend.home, ['kill', id])
      expect(killed.exitCode, killed.stderr).toBe(0)
    }
    const waited = await cli(tend.home, ['wait', next])
    expect(waited.exitCode, waited.stderr).toBe(4)
  })
})

describe('a spawner helper that does not answer', () => {
  test('the helper stopped during a kill: the kill answers and the task is recorded killed', async () => {
    const tend = await daemon()
    const work = workFolder()
    const id = await run(tend.home, work, 'exec sleep 300')
    await waitFor('the task recorded running', async () => (await show(tend.home, id)).state === 'running', 20_000)
    const helper = spawnerHelperOf(tend.process.pid!)
    expect(helper, 'the daemon has a spawner helper').not.toBeNull()
    stopProcess(helper!)
    const killed = await cli(tend.home, ['kill', id])
    expect(killed.exitCode, killed.stderr).toBe(0)
    expect((await show(tend.home, id)).state).toBe('killed')
    expect(processesOf(id)).toEqual([])
    // The stopped helper was replaced, not left behind.
    await waitFor('the stopped helper gone', () => stateOf(helper!) === null)
  })

  test('the helper stopped during a spawn: the start fails with the reason, the helper is replaced, the next task runs', async () => {
    const tend = await daemon()
    const work = workFolder()
    const warm = await run(tend.home, work, 'exit 0')
    expect((await cli(tend.home, ['wait', warm])).exitCode).toBe(0)
    const helper = spawnerHelperOf(tend.process.pid!)
    expect(helper, 'the daemon has a spawner helper').not.toBeNull()
    stopProcess(helper!)
    const id = await run(tend.home, work, 'exit 5')
    const failed = await waitFor(
      'the start recorded failed',
      async () => {
        const task = await show(tend.home, id)
        return task.state === 'failed' ? task : null
      },
      25_000,
    )
    expect(failed.reason).toMatch(/did not answer/)
    await waitFor('the stopped helper gone', () => stateOf(helper!) === null)
    const next = await run(tend.home, work, 'exit 6')
    expect((await cli(tend.home, ['wait', next])).exitCode).toBe(6)
  })
})

describe('a task that ends on a full disk while no daemon runs', () => {
  function mounted(path: string): boolean {
    return readFileSync('/proc/mounts', 'utf8')
      .split('\n')
      .some((line) => line.split(' ')[1] === path)
  }

  /** A TEND_HOME on a tmpfs of `size`; unmounted after the test. */
  function smallHome(size: string): string {
    if (process.getuid?.() !== 0) throw new Error(`this test mounts a tmpfs and needs root (running as uid ${process.getuid?.()})`)
    const mountPoint = mkdtempSync(join(tmpdir(), 'tend-keeper-full-'))
    const mount = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', mountPoint], { encoding: 'utf8' })
    if (mount.status !== 0) throw new Error(`mount -t tmpfs on ${mountPoint} failed (${mount.status}): ${mount.stderr || mount.error?.message}`)
    cleanups.push(() => {
      if (mounted(mountPoint) && spawnSync('umount', [mountPoint]).status !== 0) spawnSync('umount', ['-l', mountPoint])
      rmSync(mountPoint, { recursive: true, force: true })
      expect(mounted(mountPoint), `${mountPoint} is still mounted`).toBe(false)
    })
    const home = join(mountPoint, 'home')
    mkdirSync(home, { mode: 0o700 })
    return home
  }

  test('its keeper hands its ending to the next daemon: recorded exited 9, wait exits 9', async () => {
    const home = smallHome('6m')
    const work = workFolder()
    const first = await startTestDaemon({ home })
    const id = await run(home, work, 'while [ ! -e go ]; do sleep 0.05; done; head -c 20M /dev/zero; exit 9')
    const task = await waitFor(
      'the task recorded running',
      async () => {
        const shown = await show(home, id)
        return shown.state === 'running' && shown.keeper ? shown : null
      },
      20_000,
    )
    await first.crash()
    // The task fills the disk and ends while no daemon runs: its keeper cannot write its exit file.
    writeFileSync(join(work, 'go'), '')
    await waitFor('the task ended', () => stateOf(task.pid!) === null || stateOf(task.pid!) === 'Z', 20_000)
    expect(stateOf(task.keeper!.pid), 'the keeper still holds the ending').not.toBeNull()
    const next = await daemon({}, home)
    const waited = await runCli(['wait', id], daemonEnv(next.home), { timeoutMs: 150_000 })
    expect(waited.exitCode, waited.stderr + waited.stdout).toBe(9)
    expect(await show(home, id)).toMatchObject({ state: 'exited', exitCode: 9 })
  }, 180_000)

  test('its keeper keeps its ending while the spool is read-only: recorded exited 9 once it is writable again', async () => {
    const home = smallHome('16m')
    const mountPoint = join(home, '..')
    const work = workFolder()
    const first = await startTestDaemon({ home })
    // Its output is let go of first: a file system with a file open for writing cannot be made read-only.
    const id = await run(home, work, 'exec >/dev/null 2>&1; while [ ! -e go ]; do sleep 0.05; done; exit 9')
    const task = await waitFor(
      'the task recorded running',
      async () => {
        const shown = await show(home, id)
        return shown.state === 'running' && shown.keeper ? shown : null
      },
      20_000,
    )
    await first.crash()
    const readOnly = spawnSync('mount', ['-o', 'remount,ro', mountPoint], { encoding: 'utf8' })
    expect(readOnly.status, readOnly.stderr).toBe(0)
    writeFileSync(join(work, 'go'), '')
    await waitFor('the task ended', () => stateOf(task.pid!) === null || stateOf(task.pid!) === 'Z', 20_000)
    // The keeper met EROFS on its first try: it is still there, holding the ending.
    await waitFor('the keeper past its first try', () => stateOf(task.keeper!.pid) === 'S' || stateOf(task.keeper!.pid) === null)
    expect(stateOf(task.keeper!.pid), 'the keeper gave up on a read-only spool').not.toBeNull()
    const writable = spawnSync('mount', ['-o', 'remount,rw', mountPoint], { encoding: 'utf8' })
    expect(writable.status, writable.stderr).toBe(0)
    const next = await daemon({}, home)
    const waited = await runCli(['wait', id], daemonEnv(next.home), { timeoutMs: 60_000 })
    expect(waited.exitCode, waited.stderr + waited.stdout).toBe(9)
  })
})
