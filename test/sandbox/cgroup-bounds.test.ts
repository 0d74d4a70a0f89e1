import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { randomBytes } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmdirSync,
  rmSync,
  statfsSync,
  writeFileSync,
  writeSync,
} from 'node:fs'
import { join } from 'node:path'
import { isFinished, type StartOptions, type Task } from '../../client/index.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { runCli } from '../helpers/cli.js'
import { checkUnprivilegedUser, startTestDaemon, type TestDaemon, type TestDaemonOptions } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { daemonCgroupFolder } from '../../daemon/sandbox/cgroup-parent.js'

/*
 * Bounds on what a sandboxed task may take from the host, checked from outside: its processes
 * (counted by their marker in /proc), its groups (read in cgroupfs), its tmpfs mounts (statfs
 * through /proc/<pid>/root). And the cgroup parent a daemon puts its task groups in: one per
 * daemon uid, that no other uid can write.
 *
 * Each suite uses a cgroup folder of its own (setting cgroupName), laid out as an operator would
 * (bin/system-setup.sh --tests does the same for `tend`): the top folder root's, mode 0755; an unprivileged
 * daemon's folder in it made and given to that uid; a root daemon makes its own. So the tests
 * neither depend on nor disturb the machine's `tend` folder, and each checks that nothing is left.
 */

const CONTROLLERS = ['memory', 'pids'] as const
const PYTHON = '/usr/bin/python3'
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
const DEFAULT_WORKSPACE_PIDS = 4096
const TMP_SIZE = 64 * 1024 * 1024
const MiB = 1024 * 1024

const PROBES: Record<string, string> = {
  // Starts processes that wait for their sandbox to end, until a start is refused or `ceiling`
  // have started (so that, unbounded, it stops well before the machine's pid_max).
  'spawn-loop.py': `import os, signal, sys
ceiling = int(sys.argv[1])
started = 0
while started < ceiling:
    try:
        os.posix_spawn('/bin/sleep', ['sleep', 'infinity'], os.environ)
    except OSError as error:
        print(f'refused after {started}: {error.strerror}', flush=True)
        break
    started += 1
else:
    print(f'no refusal after {started}', flush=True)
signal.pause()
`,
  'hog.py': `chunks = []
while True:
    chunks.append(bytearray(b'x') * (8 * 1024 * 1024))
`,
}

const q = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`

function cgroupDir(name: string, controller: string, ...rest: Array<string | number>): string {
  return join('/sys/fs/cgroup', controller, name, ...rest.map(String))
}

/** A fresh name for a suite's own cgroup folder. */
function cgroupName(label: string): string {
  return `tend-test-${label}-${process.pid}-${randomBytes(3).toString('hex')}`
}

/** The operator's part for an unprivileged daemon: the top folder root's, the daemon's folder its own. */
function delegate(name: string, uid: number, gid: number): void {
  for (const controller of CONTROLLERS) {
    mkdirSync(cgroupDir(name, controller), { mode: 0o755 })
    mkdirSync(cgroupDir(name, controller, uid), { mode: 0o755 })
    chownSync(cgroupDir(name, controller, uid), uid, gid)
  }
}

/** Fails when a task group is left under the suite's folder; then removes the folder. */
function removeCgroupFolder(name: string): void {
  const left: string[] = []
  for (const controller of CONTROLLERS) {
    const top = cgroupDir(name, controller)
    if (!existsSync(top)) continue
    // <top>/<uid>/<daemon>/<task id>: a daemon's folder may outlive it (a crash), its tasks' groups may not.
    for (const entry of readdirSync(top, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue
      const owned = join(top, entry.name)
      for (const daemonFolder of readdirSync(owned, { withFileTypes: true })) {
        if (!daemonFolder.isDirectory()) continue
        const folder = join(owned, daemonFolder.name)
        for (const group of readdirSync(folder, { withFileTypes: true })) if (group.isDirectory()) left.push(join(folder, group.name))
        for (const group of left.filter((path) => path.startsWith(`${folder}/`))) rmdirIfPossible(group)
        rmdirIfPossible(folder)
      }
      rmdirIfPossible(owned)
    }
    rmdirIfPossible(top)
  }
  expect(left, 'task groups left behind').toEqual([])
}

function rmdirIfPossible(dir: string): void {
  try {
    rmdirSync(dir)
  } catch {
    // reported by the caller
  }
}

/** A process of the task inside its sandbox (another mount namespace than ours), for /proc/<pid>/root. */
/**
 * A process of the task inside its sandbox: one in the mount namespace its sandbox's init made, not
 * bubblewrap's own (which, for a task on its own identity, is in a private namespace of the
 * spawner's too). The task's command runs as a child of that init, which runs as a child of
 * bubblewrap: a process whose parent has the task's marker and another mount namespace than its own
 * grandparent's is inside.
 */
function sandboxedProcess(id: string): number | null {
  const marked = new Set(processesWithEnv(`TEND_TASK_ID=${id}`))
  const mountOf = (pid: number) => readlinkSync(`/proc/${pid}/ns/mnt`)
  const parentOf = (pid: number) => Number(/^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1])
  for (const pid of marked) {
    try {
      const parent = parentOf(pid)
      if (!marked.has(parent)) continue
      const bwrap = parentOf(parent)
      if (marked.has(bwrap) && mountOf(pid) === mountOf(parent) && mountOf(parent) !== mountOf(bwrap)) return pid
    } catch {
      // gone
    }
  }
  return null
}

function commandName(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim()
  } catch {
    return null
  }
}

function usedBytes(path: string): number {
  const stats = statfsSync(path)
  return (stats.blocks - stats.bfree) * stats.bsize
}

function memoryStat(dir: string, key: string): number {
  const line = readFileSync(join(dir, 'memory.stat'), 'utf8')
    .split('\n')
    .find((each) => each.startsWith(`${key} `))
  return Number(line?.split(' ')[1] ?? Number.NaN)
}

function defineBounds(who: 'root' | 'non-root'): void {
  describe(`bounds of sandboxed tasks, daemon as ${who}`, () => {
    const base = join('/var/tmp', `tend-bounds-${who}-${process.pid}-${randomBytes(3).toString('hex')}`)
    const tendHome = join(base, 'tend-home')
    const userHome = join(base, 'user')
    const probes = join(base, 'probes')
    const name = cgroupName(who)
    const owner = who === 'root' ? { uid: 0, gid: 0 } : checkUnprivilegedUser()
    const daemonUser: TestDaemonOptions['user'] = who === 'root' ? undefined : 'unprivileged'
    const env = { HOME: userHome, PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_KILL_GRACE: '500ms', TEND_CGROUP_NAME: name }
    const groupOf = (controller: string, id: string) => cgroupDir(name, controller, owner.uid, daemonCgroupFolder(daemon.home), id)
    const taskIds: string[] = []
    let daemon: TestDaemon
    /** Daemons a test crashed: their temp folders go once nothing of them runs (afterAll). */
    const crashed: TestDaemon[] = []

    function plant(): void {
      mkdirSync(base, { mode: 0o755 })
      mkdirSync(join(userHome, '.cache', 'host-tool'), { recursive: true })
      writeFileSync(join(userHome, '.cache', 'host-tool', 'entry'), 'host cache\n')
      mkdirSync(tendHome)
      writeFileSync(join(tendHome, 'config.json'), JSON.stringify({ tmpSizeBytes: TMP_SIZE }))
      mkdirSync(probes)
      for (const [file, text] of Object.entries(PROBES)) writeFileSync(join(probes, file), text)
      for (const path of [base, userHome, join(userHome, '.cache'), join(userHome, '.cache', 'host-tool'), tendHome, join(tendHome, 'config.json')])
        chownSync(path, owner.uid, owner.gid)
      if (who === 'non-root') delegate(name, owner.uid, owner.gid)
    }

    function workspace(): string {
      const dir = join(base, `ws-${randomBytes(4).toString('hex')}`)
      mkdirSync(dir)
      chownSync(dir, owner.uid, owner.gid)
      return dir
    }

    async function start(command: string, options: Partial<StartOptions> = {}): Promise<Task> {
      const started = await daemon.client.start({ command, shell: true, cwd: options.cwd ?? workspace(), sandbox: 'workspace', timeoutMs: 120_000, ...options })
      taskIds.push(started.id)
      return started
    }

    /** The task's ending, once its groups are gone too (they go before the final record lands). */
    async function ended(id: string): Promise<Task> {
      const task = await daemon.client.wait(id, { timeoutMs: 120_000 })
      for (const controller of CONTROLLERS) expect(existsSync(groupOf(controller, id)), `${controller} group of ${id} after its end`).toBe(false)
      return task
    }

    beforeAll(async () => {
      plant()
      daemon = await startTestDaemon({ user: daemonUser, home: tendHome, env })
    })

    afterAll(async () => {
      // Every step runs, whatever failed before it; the first failure is reported.
      const failures: unknown[] = []
      const step = async (cleanup: () => unknown) => {
        try {
          await cleanup()
        } catch (error) {
          failures.push(error)
        }
      }
      // A test that failed midway leaves its task running: stopped here, then nothing of any may be left.
      await step(async () => {
        for (const id of taskIds) await daemon.client.kill(id, { graceMs: 0 }).catch(() => undefined)
        await waitFor(
          'no process of any bounds-suite task left',
          () => taskIds.every((id) => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0),
          30_000,
        )
      })
      await step(() => daemon?.stop())
      for (const each of crashed) await step(() => each.stop())
      await step(() => removeCgroupFolder(name))
      rmSync(base, { recursive: true, force: true })
      if (failures.length > 0) throw failures[0]
    })

    test('status says which bounds each profile gets here', async () => {
      const status = await daemon.client.status()
      expect(status.sandbox.profiles).toEqual(['off', 'workspace', 'strict'])
      const allTasks = Math.floor(
        Math.min(Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8')), Number(readFileSync('/proc/sys/kernel/threads-max', 'utf8'))) / 2,
      )
      expect(status.sandbox.bounds).toEqual({
        workspace: { pidsMax: DEFAULT_WORKSPACE_PIDS, memoryBytes: null, memoryAccounted: true, tmpfsBytes: TMP_SIZE },
        strict: { pidsMax: 512, memoryBytes: 2 * 1024 ** 3, memoryAccounted: true, tmpfsBytes: TMP_SIZE },
        allTasksPidsMax: allTasks,
        // Half of what the kernel hands out, as for one daemon: see the test on all daemons together below.
        ...(who === 'root' ? { allDaemonsPidsMax: allTasks } : { allDaemonsPidsMax: null, allDaemonsProblem: expect.stringContaining("is root's") }),
      })
      const text = await runCli(['status'], daemon.env)
      expect(text.exitCode).toBe(0)
      expect(text.stdout).toContain(
        `bounds:      workspace: 4096 processes, memory counted (no limit), tmpfs 64M in all; strict: 512 processes, memory 2.0G, tmpfs 64M in all\n             all tasks together: ${allTasks} processes\n`,
      )
    })

    test('workspace: a spawn loop stops at the default process limit, counted from outside; the host and other tasks keep working', async () => {
      const started = await start(`exec ${PYTHON} ${q(join(probes, 'spawn-loop.py'))} ${DEFAULT_WORKSPACE_PIDS + 512}`)
      const output = await waitFor(
        'the spawn loop to be refused or reach its ceiling',
        async () => {
          const { data } = await daemon.client.read(started.id)
          return /refused|no refusal/.test(data) ? data : null
        },
        90_000,
      )
      const group = groupOf('pids', started.id)
      // A process just spawned shows its environment (the marker) only once its exec is through;
      // on a busy machine many still wait for a CPU to get there.
      const count = () => processesWithEnv(`TEND_TASK_ID=${started.id}`).filter(isAlive).length
      const marked = await waitFor(
        'the spawned processes to show their marker',
        () => {
          const found = count()
          return found > DEFAULT_WORKSPACE_PIDS - 16 ? found : null
        },
        30_000,
      ).catch(() => count())
      const seen = `${output.trim()}; ${marked} marked processes; pids.current ${readFileSync(join(group, 'pids.current'), 'utf8').trim()}; ${readFileSync(join(group, 'pids.events'), 'utf8').trim()}`
      expect(output, seen).toMatch(/^refused after \d+: Resource temporarily unavailable\n/)
      // Refused by the task's own limit (not by the machine running out of pids), counted from here.
      expect(readFileSync(join(group, 'pids.max'), 'utf8').trim()).toBe(String(DEFAULT_WORKSPACE_PIDS))
      expect(Number(/max (\d+)/.exec(readFileSync(join(group, 'pids.events'), 'utf8'))?.[1]), seen).toBeGreaterThan(0)
      expect(marked, seen).toBeLessThanOrEqual(DEFAULT_WORKSPACE_PIDS)
      expect(marked, seen).toBeGreaterThan(DEFAULT_WORKSPACE_PIDS - 16)
      // The host starts processes, and another task runs to its end, while the loop holds its limit.
      expect(spawnSync('true').status).toBe(0)
      const other = await start('echo other')
      expect(await ended(other.id)).toMatchObject({ state: 'exited', exitCode: 0 })
      await daemon.client.kill(started.id, { graceMs: 500 })
      const task = await ended(started.id)
      expect(task).toMatchObject({ state: 'killed', sandbox: 'workspace', pidsMax: DEFAULT_WORKSPACE_PIDS, memoryBytes: null })
      expect(task.reason).toMatch(/; process limit of 4096 reached$/)
      await waitFor('no process of the spawn loop left', () => processesWithEnv(`TEND_TASK_ID=${started.id}`).filter(isAlive).length === 0, 30_000)
    })

    test('workspace: a 2,000-process parallel build succeeds under the default process limit', async () => {
      const cwd = workspace()
      const gate = join(cwd, 'gate')
      expect(spawnSync('mkfifo', ['-m', '0666', gate]).status).toBe(0)
      chownSync(gate, owner.uid, owner.gid)
      // Held open for writing, so that every job's read blocks until the test lets them all go.
      const writer = openSync(gate, 'r+')
      try {
        const started = await start(`seq 2000 | xargs -P 2000 -n 1 sh -c 'read line < gate' sh && echo built`, { cwd })
        const marker = `TEND_TASK_ID=${started.id}`
        await waitFor('2,000 jobs running at once', () => processesWithEnv(marker).filter(isAlive).length >= 2000, 90_000)
        expect(readFileSync(join(groupOf('pids', started.id), 'pids.max'), 'utf8').trim()).toBe(String(DEFAULT_WORKSPACE_PIDS))
        expect(Number(readFileSync(join(groupOf('pids', started.id), 'pids.current'), 'utf8'))).toBeGreaterThanOrEqual(2000)
        writeSync(writer, '\n'.repeat(2000))
        const task = await ended(started.id)
        expect(task).toMatchObject({ state: 'exited', exitCode: 0, reason: null })
        expect((await daemon.client.read(started.id)).data).toBe('built\n')
      } finally {
        closeSync(writer)
      }
    })

    test("workspace: /tmp, /dev/shm and ~/.cache together hold at most tmpSizeBytes, and what lands counts in the task's memory group", async () => {
      const started = await start(
        `for d in /tmp /dev/shm "$HOME/.cache"; do dd if=/dev/zero of="$d/fill" bs=1M count=64 2>/dev/null; done; echo filled; exec sleep infinity`,
      )
      await waitFor('the task to fill its tmpfs mounts', async () => (await daemon.client.read(started.id)).data === 'filled\n', 60_000)
      const pid = sandboxedProcess(started.id)
      expect(pid, 'a process of the task in its sandbox').not.toBeNull()
      const landed = ['/tmp', '/dev/shm', join(userHome, '.cache')].map((path) => usedBytes(`/proc/${pid}/root${path}`))
      for (const bytes of landed) expect(bytes).toBeGreaterThan(MiB)
      const total = landed.reduce((sum, bytes) => sum + bytes, 0)
      expect(total).toBeLessThanOrEqual(TMP_SIZE)
      // Counted where the kernel charges it: shmem pages go to the writer's memory group.
      expect(memoryStat(groupOf('memory', started.id), 'shmem')).toBeGreaterThanOrEqual(total)
      await daemon.client.kill(started.id, { graceMs: 0 })
      expect((await ended(started.id)).state).toBe('killed')
    })

    for (const sandbox of ['workspace', 'strict'] as const) {
      test(`${sandbox}: --memory 64M is enforced; the task is killed and the reason names the limit`, async () => {
        const started = await start(`exec ${PYTHON} ${q(join(probes, 'hog.py'))}`, { sandbox, memoryBytes: 64 * MiB })
        expect(started).toMatchObject({ sandbox, memoryBytes: 64 * MiB })
        const task = await ended(started.id)
        expect(task).toMatchObject({ state: 'killed', signal: 'SIGKILL', stoppedBy: 'memory-limit', reason: 'memory limit of 64M reached' })
      })
    }

    test('workspace: --pids is enforced and recorded; sandbox off refuses limits, naming the field', async () => {
      const started = await start(`exec ${PYTHON} ${q(join(probes, 'spawn-loop.py'))} 20`, { pidsMax: 8 })
      expect(started).toMatchObject({ pidsMax: 8 })
      await waitFor('the spawn loop to stop', async () => /refused|no refusal/.test((await daemon.client.read(started.id)).data), 30_000)
      expect((await daemon.client.read(started.id)).data).toMatch(/^refused after \d+: Resource temporarily unavailable\n/)
      expect(Number(readFileSync(join(groupOf('pids', started.id), 'pids.current'), 'utf8'))).toBeLessThanOrEqual(8)
      await daemon.client.kill(started.id, { graceMs: 0 })
      expect((await ended(started.id)).reason).toMatch(/; process limit of 8 reached$/)
      await expect(daemon.client.start({ command: ['true'], cwd: workspace(), sandbox: 'off', pidsMax: 8 })).rejects.toMatchObject({
        code: 'TEND_ERR_VALIDATION',
        message: expect.stringContaining('body/pidsMax: limits need sandbox workspace or strict, got sandbox off'),
      })
    })

    test("all of a daemon's tasks together are bounded too (half the kernel's pid_max by default, the rest is the host's); the setting lowers it", async () => {
      const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'))
      const threadsMax = Number(readFileSync('/proc/sys/kernel/threads-max', 'utf8'))
      const daemonFolder = (home: string) => cgroupDir(name, 'pids', owner.uid, daemonCgroupFolder(home))
      expect(readFileSync(join(daemonFolder(daemon.home), 'pids.max'), 'utf8').trim()).toBe(String(Math.floor(Math.min(pidMax, threadsMax) / 2)))
      const small = await startTestDaemon({ user: daemonUser, env: { ...env, TEND_DAEMON_PIDS_MAX: '24' } })
      try {
        expect(readFileSync(join(daemonFolder(small.home), 'pids.max'), 'utf8').trim()).toBe('24')
        const loops = await Promise.all(
          [0, 1].map(async () => {
            const started = await small.client.start({
              command: `exec ${PYTHON} ${q(join(probes, 'spawn-loop.py'))} 40`,
              shell: true,
              cwd: workspace(),
              sandbox: 'workspace',
              timeoutMs: 120_000,
            })
            taskIds.push(started.id)
            return started
          }),
        )
        // Each loop stops at a refusal; or its task never got to run a loop, the budget taken by the
        // other's (its sandbox could not be set up): that task ends, and the bound held all the same.
        await waitFor(
          'both spawn loops to stop, or a task to end without the processes to start',
          async () =>
            (
              await Promise.all(
                loops.map(async (task) => /refused|no refusal/.test((await small.client.read(task.id)).data) || isFinished(await small.client.get(task.id))),
              )
            ).every(Boolean),
          60_000,
        )
        const counted = loops.reduce((sum, task) => sum + processesWithEnv(`TEND_TASK_ID=${task.id}`).filter(isAlive).length, 0)
        expect(counted, 'processes of both tasks together').toBeLessThanOrEqual(24)
        expect((await Promise.all(loops.map(async (task) => (await small.client.read(task.id)).data))).join('')).toMatch(
          /refused after \d+: Resource temporarily unavailable/,
        )
        for (const task of loops) await small.client.kill(task.id, { graceMs: 0 })
      } finally {
        await small.stop()
      }
    })

    test("all daemons together leave the host its share: a root daemon bounds tend's folder and its uid's; an unprivileged one, whose uid folder's files are root's, says it cannot and what the operator runs", async () => {
      const share = Math.floor(
        Math.min(Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8')), Number(readFileSync('/proc/sys/kernel/threads-max', 'utf8'))) / 2,
      )
      const top = cgroupDir(name, 'pids')
      const own = cgroupDir(name, 'pids', owner.uid)
      const bounds = (await daemon.client.status()).sandbox.bounds
      if (who === 'root') {
        // Read from the kernel's files: every daemon's tasks of every uid are below tend's folder.
        expect(readFileSync(join(top, 'pids.max'), 'utf8').trim()).toBe(String(share))
        expect(readFileSync(join(own, 'pids.max'), 'utf8').trim()).toBe(String(share))
        expect(bounds.allDaemonsPidsMax).toBe(share)
        expect(bounds.allDaemonsProblem).toBeUndefined()
        // An operator's own number is kept: a second daemon does not raise it.
        writeFileSync(join(top, 'pids.max'), String(share - 1))
        const second = await startTestDaemon({ env })
        try {
          expect(readFileSync(join(top, 'pids.max'), 'utf8').trim()).toBe(String(share - 1))
          expect((await second.client.status()).sandbox.bounds.allDaemonsPidsMax).toBe(share - 1)
        } finally {
          await second.stop()
          writeFileSync(join(top, 'pids.max'), String(share))
        }
        return
      }
      // The operator made both folders (delegate()): their limits are root's files, unset.
      expect(readFileSync(join(own, 'pids.max'), 'utf8').trim()).toBe('max')
      expect(lstatSync(join(own, 'pids.max')).uid).toBe(0)
      expect(bounds.allDaemonsPidsMax).toBeNull()
      expect(bounds.allDaemonsProblem).toContain(`echo ${share} > ${join(top, 'pids.max')}`)
      expect(readFileSync(join(tendHome, 'daemon.log'), 'utf8')).toContain('the tasks of all daemons together are not bounded')
      const text = await runCli(['status'], daemon.env)
      expect(text.stdout).toContain(`all daemons together: no limit: ${bounds.allDaemonsProblem}`)
    })

    test('groups outlive a daemon crash and are removed by the next daemon once the task is gone', async () => {
      const started = await start('exec sleep infinity')
      const running = await waitFor('the task recorded running under its keeper', async () => {
        const task = await daemon.client.get(started.id)
        return task.state === 'running' && task.keeper ? task : null
      })
      // Its command runs inside the sandbox: bubblewrap is set up, so it dies with its keeper (--die-with-parent).
      await waitFor('sleep running in the sandbox', () => processesWithEnv(`TEND_TASK_ID=${started.id}`).some((pid) => commandName(pid) === 'sleep'))
      for (const controller of CONTROLLERS) expect(existsSync(groupOf(controller, started.id)), `${controller} group while it runs`).toBe(true)
      crashed.push(daemon)
      await daemon.crash()
      daemon.client.close()
      // Its keeper goes too: nobody is left to remove the groups but the next daemon's recovery.
      process.kill(running.keeper!.pid, 'SIGKILL')
      await waitFor('no process of the task left', () => processesWithEnv(`TEND_TASK_ID=${started.id}`).filter(isAlive).length === 0, 30_000)
      for (const controller of CONTROLLERS) expect(existsSync(groupOf(controller, started.id)), `${controller} group with no daemon`).toBe(true)
      daemon = await startTestDaemon({ user: daemonUser, home: tendHome, env })
      const task = await daemon.client.get(started.id)
      expect(task.state).toBe('lost')
      for (const controller of CONTROLLERS) expect(existsSync(groupOf(controller, started.id)), `${controller} group after recovery`).toBe(false)
    })
  })
}

defineBounds('root')
defineBounds('non-root')

describe('the cgroup parent: a daemon uses only folders no other uid can write', () => {
  const workspace = join('/var/tmp', `tend-parent-${process.pid}-${randomBytes(3).toString('hex')}`)
  const names: string[] = []
  beforeAll(() => {
    mkdirSync(workspace, { mode: 0o755 })
  })
  afterAll(() => {
    for (const name of names) removeCgroupFolder(name)
    rmSync(workspace, { recursive: true, force: true })
  })

  interface Case {
    title: string
    who: 'root' | 'non-root'
    /** Lays the folders out for a daemon of `uid`; answers the folder the reason must name. */
    layout: (name: string, uid: number) => string
    fix: (folder: string, uid: number) => string
  }
  const other = () => checkUnprivilegedUser()
  const cases: Case[] = [
    {
      title: 'a root daemon, the top folder owned by another user',
      who: 'root',
      layout: (name) => {
        for (const controller of CONTROLLERS) {
          mkdirSync(cgroupDir(name, controller))
          chownSync(cgroupDir(name, controller), other().uid, other().gid)
        }
        return cgroupDir(name, 'memory')
      },
      fix: (folder) => `chown root:root ${folder}`,
    },
    {
      title: 'a root daemon, the top folder writable by others',
      who: 'root',
      layout: (name) => {
        for (const controller of CONTROLLERS) {
          mkdirSync(cgroupDir(name, controller))
          chmodSync(cgroupDir(name, controller), 0o777)
        }
        return cgroupDir(name, 'memory')
      },
      fix: (folder) => `chmod go-w ${folder}`,
    },
    {
      title: 'a root daemon, its own folder owned by another user',
      who: 'root',
      layout: (name) => {
        for (const controller of CONTROLLERS) {
          mkdirSync(cgroupDir(name, controller, 0), { recursive: true })
          chownSync(cgroupDir(name, controller, 0), other().uid, other().gid)
        }
        return cgroupDir(name, 'memory', 0)
      },
      fix: (folder) => `chown 0 ${folder}`,
    },
    {
      title: 'a root daemon, its own folder writable by its group',
      who: 'root',
      layout: (name) => {
        for (const controller of CONTROLLERS) {
          mkdirSync(cgroupDir(name, controller, 0), { recursive: true })
          chmodSync(cgroupDir(name, controller, 0), 0o775)
        }
        return cgroupDir(name, 'memory', 0)
      },
      fix: (folder) => `chmod go-w ${folder}`,
    },
    {
      title: 'an unprivileged daemon without a folder given to it',
      who: 'non-root',
      layout: (name, uid) => {
        for (const controller of CONTROLLERS) mkdirSync(cgroupDir(name, controller), { mode: 0o755 })
        return cgroupDir(name, 'memory', uid)
      },
      fix: (folder) => `mkdir -p ${folder}`,
    },
    {
      title: 'an unprivileged daemon, its folder left to root',
      who: 'non-root',
      layout: (name, uid) => {
        for (const controller of CONTROLLERS) mkdirSync(cgroupDir(name, controller, uid), { recursive: true, mode: 0o755 })
        return cgroupDir(name, 'memory', uid)
      },
      fix: (folder, uid) => `chown ${uid} ${folder}`,
    },
  ]

  for (const each of cases) {
    test(`${each.title}: cgroups unavailable with a reason that says what to fix; workspace runs unbounded and says so`, async () => {
      const name = cgroupName('parent')
      names.push(name)
      const uid = each.who === 'root' ? 0 : other().uid
      const folder = each.layout(name, uid)
      const before = CONTROLLERS.map((controller) => readdirSync(cgroupDir(name, controller)).sort())
      const daemon = await startTestDaemon({
        user: each.who === 'root' ? undefined : 'unprivileged',
        env: { PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_CGROUP_NAME: name },
      })
      try {
        const status = await daemon.client.status()
        expect(status.sandbox.profiles).toEqual(['off', 'workspace'])
        expect(status.sandbox.cgroups).toMatchObject({ memory: false, pids: false })
        expect(status.sandbox.missing.strict).toContain(folder)
        expect(status.sandbox.missing.strict).toContain(each.fix(folder, uid))
        expect(status.sandbox.bounds.workspace).toEqual({ pidsMax: null, memoryBytes: null, memoryAccounted: false, tmpfsBytes: 1024 ** 3 })
        expect(status.sandbox.bounds.reason).toContain(folder)
        expect(status.sandbox.bounds.allTasksPidsMax).toBeNull()
        // A limit cannot be honoured: refused, never ignored.
        await expect(daemon.client.start({ command: ['true'], cwd: workspace, sandbox: 'workspace', pidsMax: 64 })).rejects.toMatchObject({
          code: 'TEND_ERR_SANDBOX_UNAVAILABLE',
        })
        const started = await daemon.client.start({ command: ['true'], cwd: workspace, sandbox: 'workspace' })
        expect(started).toMatchObject({ pidsMax: null, memoryBytes: null })
        expect(await daemon.client.wait(started.id, { timeoutMs: 30_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
        // Nothing was made under the folders it refused.
        expect(CONTROLLERS.map((controller) => readdirSync(cgroupDir(name, controller)).sort())).toEqual(before)
      } finally {
        await daemon.stop()
      }
    })
  }
})
