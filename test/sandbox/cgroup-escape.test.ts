import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { isAlive } from '../helpers/processes.js'
import { runCli } from '../helpers/cli.js'
import { checkUnprivilegedUser, FIXTURES, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { mountCgroup2, unmountCgroup2 } from '../helpers/cgroup2-mount.js'

/*
 * An `off` task runs on the daemon's uid, which owns the files of the task groups the daemon
 * makes: the task can make a group beside its own and move a child there, out of the member list
 * a kill reads (v2 checks only the common ancestor's cgroup.procs; v1 the target's file and the
 * uid). The task's keeper is a child subreaper: that child stays below it whatever group it is in,
 * so a kill, a daemon's stop and the task's end reach it through the keeper's process tree.
 * The fixture (cgroup-escape.sh) moves a setsid child that ignores TERM; every group it makes is
 * removed here.
 */

let mount: string
let subtree: string
let scratch: string
/** The groups the tasks made, removed once their processes are gone. */
const escapes: string[] = []

beforeAll(() => {
  ;({ mount, subtree } = mountCgroup2('escape'))
  scratch = mkdtempSync(join(tmpdir(), 'tend-cgroup-escape-'))
  chmodSync(scratch, 0o755)
})

afterAll(async () => {
  try {
    await removeEscapes()
  } finally {
    unmountCgroup2({ mount, subtree })
    rmSync(scratch, { recursive: true, force: true })
  }
})

function members(group: string): number[] {
  try {
    return readFileSync(join(group, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number)
  } catch {
    return []
  }
}

/** Kills what a failed test left in the groups the tasks made, then removes them. */
async function removeEscapes(): Promise<void> {
  for (const group of escapes.splice(0)) {
    for (const pid of members(group)) process.kill(pid, 'SIGKILL')
    await waitFor(`${group} to be empty`, () => members(group).length === 0)
    if (existsSync(group)) rmdirSync(group)
  }
}

/** A process's parent from /proc (its stat line's fourth field), or null once it is gone. */
function parentOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
  } catch {
    return null
  }
}

function readPid(file: string): number | undefined {
  try {
    return Number(readFileSync(file, 'utf8')) || undefined
  } catch {
    return undefined
  }
}

/** Runs `start` with this test process in `group` (its children are born there), then moves it back. */
async function startInGroup<T>(group: string, start: () => Promise<T>): Promise<T> {
  const own = join(mount, /^0::(.*)$/m.exec(readFileSync('/proc/self/cgroup', 'utf8'))![1]!)
  writeFileSync(join(group, 'cgroup.procs'), String(process.pid))
  try {
    return await start()
  } finally {
    writeFileSync(join(own, 'cgroup.procs'), String(process.pid))
  }
}

interface Escaped {
  id: string
  dir: string
  child: number
}

/**
 * Starts the fixture under `off` and waits until its child is out of the task group. `base`: where
 * the hierarchy the task's line names is mounted; `controller`: that line's ('' on v2).
 */
async function startEscape(
  daemon: TestDaemon,
  base: string,
  controller: string,
  mode: 'stay' | 'exit',
  options: { where?: 'beside' | 'outside'; tty?: boolean; term?: 'ignore' | 'cleanup' } = {},
): Promise<Escaped> {
  const dir = mkdtempSync(join(scratch, 'task-'))
  chmodSync(dir, 0o777)
  const command = ['sh', join(FIXTURES, 'cgroup-escape.sh'), dir, base, controller, mode, options.where ?? 'beside', options.term ?? 'ignore']
  const task = await daemon.client.start({ command, sandbox: 'off', ...(options.tty ? { tty: true } : {}) })
  const child = await waitFor('the child to be moved out of the task group', async () => {
    const ended = await daemon.client.get(task.id)
    if (ended.state !== 'running') throw new Error(`the task ended: ${JSON.stringify(ended)} ${(await daemon.client.read(task.id)).data}`)
    return readPid(join(dir, 'child.pid'))
  })
  const escape = readFileSync(join(dir, 'escape'), 'utf8').trim()
  escapes.push(escape)
  // The child alone, with what it runs for a moment (the cleanup variant's loop forks a `sleep`
  // each 50 ms: its children are in its group too, and may already be gone when looked at).
  const moved = members(escape)
  expect(moved).toContain(child)
  expect(moved.filter((pid) => pid !== child && parentOf(pid) !== child && parentOf(pid) !== null)).toEqual([])
  return { id: task.id, dir, child }
}

/** A kill, then a task whose leader exits by itself, then the daemon's stop, on one daemon. */
async function expectEveryEndReachesTheChild(daemon: TestDaemon, base: string, controller: string): Promise<void> {
  const killed = await startEscape(daemon, base, controller, 'stay')
  expect(await daemon.client.kill(killed.id)).toMatchObject({ state: 'killed' })
  expect(isAlive(killed.child)).toBe(false)

  const ends = await startEscape(daemon, base, controller, 'exit')
  writeFileSync(join(ends.dir, 'go'), '')
  expect(await daemon.client.wait(ends.id)).toMatchObject({ state: 'exited', exitCode: 0 })
  await waitFor('the moved child of a task that ended to be killed with its leftovers', () => !isAlive(ends.child))

  const stopped = await startEscape(daemon, base, controller, 'stay')
  const stop = await runCli(['stop'], daemon.env)
  expect(stop.exitCode, stop.stderr).toBe(0)
  await waitFor('the daemon to exit', () => daemon.process.exitCode !== null || daemon.process.signalCode !== null)
  expect(isAlive(stopped.child)).toBe(false)
  await removeEscapes()
}

describe('an off task that moves a child out of its task group', () => {
  test('cgroup v2, a root daemon: a kill, its end and the daemon stop each leave none of it', async () => {
    const daemon = await startTestDaemon({ env: { TEND_CGROUP_ROOT: join(subtree), TEND_KILL_GRACE: '300ms' } })
    try {
      await expectEveryEndReachesTheChild(daemon, mount, '')
    } finally {
      await removeEscapes()
      await daemon.stop()
    }
  })

  test('cgroup v2, a non-root daemon in a folder delegated to it: a kill, its end and the daemon stop each leave none of it', async () => {
    const user = checkUnprivilegedUser()
    const delegated = join(subtree, 'delegated')
    mkdirSync(delegated, { mode: 0o755 })
    for (const path of [delegated, ...['cgroup.procs', 'cgroup.subtree_control', 'cgroup.threads'].map((file) => join(delegated, file))])
      chownSync(path, user.uid, user.gid)
    // The daemon starts in a group of the delegated folder, as its service manager would put it:
    // a non-root daemon can move its task's first process only within what was delegated to it.
    const leaf = join(delegated, 'daemon')
    mkdirSync(leaf)
    const daemon = await startInGroup(leaf, () => startTestDaemon({ user: 'unprivileged', env: { TEND_CGROUP_ROOT: delegated, TEND_KILL_GRACE: '300ms' } }))
    try {
      expect((await daemon.client.status()).sandbox.cgroups.hierarchy).toMatchObject({ version: 2 })
      await expectEveryEndReachesTheChild(daemon, mount, '')
    } finally {
      await removeEscapes()
      await daemon.stop()
    }
  })

  test('cgroup v1, a non-root daemon: a kill, its end and the daemon stop each leave none of it', async () => {
    const daemon = await startTestDaemon({ user: 'unprivileged', env: { TEND_KILL_GRACE: '300ms' } })
    try {
      expect((await daemon.client.status()).sandbox.cgroups.hierarchy).toMatchObject({ version: 1 })
      await expectEveryEndReachesTheChild(daemon, '/sys/fs/cgroup/pids', 'pids')
    } finally {
      await removeEscapes()
      await daemon.stop()
    }
  })

  test('cgroup v2, a root daemon, a task on a terminal (its keeper a subreaper too): a kill and its end each leave none of it', async () => {
    const daemon = await startTestDaemon({ env: { TEND_CGROUP_ROOT: subtree, TEND_KILL_GRACE: '300ms' } })
    try {
      const killed = await startEscape(daemon, mount, '', 'stay', { tty: true })
      expect(await daemon.client.kill(killed.id)).toMatchObject({ state: 'killed' })
      expect(isAlive(killed.child)).toBe(false)
      const ends = await startEscape(daemon, mount, '', 'exit', { tty: true })
      writeFileSync(join(ends.dir, 'go'), '')
      expect(await daemon.client.wait(ends.id)).toMatchObject({ state: 'exited', exitCode: 0 })
      await waitFor('the moved child of a terminal task that ended to be killed with its leftovers', () => !isAlive(ends.child))
    } finally {
      await removeEscapes()
      await daemon.stop()
    }
  })

  test("a stop's grace still holds for a moved child whose leader ends at once on TERM: it cleans up, then ends", async () => {
    const daemon = await startTestDaemon({ env: { TEND_CGROUP_ROOT: subtree, TEND_KILL_GRACE: '10s' } })
    try {
      const task = await startEscape(daemon, mount, '', 'stay', { term: 'cleanup' })
      expect(await daemon.client.kill(task.id)).toMatchObject({ state: 'killed' })
      expect(readFileSync(join(task.dir, 'cleaned'), 'utf8')).toBe('cleaned\n')
      expect(isAlive(task.child)).toBe(false)
    } finally {
      await removeEscapes()
      await daemon.stop()
    }
  })

  test('across a daemon crash: the next daemon kills it with its task; a task that ends while no daemon runs takes it along (its keeper)', async () => {
    const env = { TEND_CGROUP_ROOT: subtree, TEND_KILL_GRACE: '300ms' }
    const first = await startTestDaemon({ env })
    let next: TestDaemon | undefined
    try {
      // Outside the daemon's folder: the next daemon's sweep of its folder does not find it.
      const resumed = await startEscape(first, mount, '', 'stay', { where: 'outside' })
      const ends = await startEscape(first, mount, '', 'exit')
      await first.crash()
      first.client.close()
      // No helper hears this end: the keeper kills what the task left behind itself.
      writeFileSync(join(ends.dir, 'go'), '')
      await waitFor('the moved child of the task that ended with no daemon to be killed by its keeper', () => !isAlive(ends.child))
      next = await startTestDaemon({ home: first.home, env })
      expect(await next.client.wait(ends.id)).toMatchObject({ state: 'exited', exitCode: 0 })
      expect((await next.client.get(resumed.id)).state).toBe('running')
      expect(isAlive(resumed.child)).toBe(true)
      expect(await next.client.kill(resumed.id)).toMatchObject({ state: 'killed' })
      expect(isAlive(resumed.child)).toBe(false)
    } finally {
      await removeEscapes()
      await (next ?? first).stop()
    }
  })
})
