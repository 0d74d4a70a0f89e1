import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { daemonCgroupFolder } from '../../daemon/sandbox/cgroup-parent.js'
import { isAlive } from '../helpers/processes.js'
import { runCli } from '../helpers/cli.js'
import { FIXTURES, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { mountCgroup2, unmountCgroup2 } from '../helpers/cgroup2-mount.js'

/*
 * A real daemon whose task groups are on a real cgroup v2 hierarchy: this host's, mounted on a temp
 * folder for the test (as root). The host is hybrid: its v2 hierarchy has no controllers (memory
 * and pids are v1's), but every v2 group has cgroup.kill, cgroup.events and cpu.stat, which is
 * what is tested here: the tree kill, the end of a task's last process, its CPU time. The limit
 * files are tested on fake trees (cgroup-v2-root.test.ts).
 */

let mount: string
let subtree: string
let daemon: TestDaemon
let scratch: string

beforeAll(async () => {
  ;({ mount, subtree } = mountCgroup2('v2'))
  scratch = mkdtempSync(join(tmpdir(), 'tend-cgroup2-tasks-'))
  daemon = await startTestDaemon({ env: { TEND_CGROUP_ROOT: subtree, TEND_KILL_GRACE: '500ms' } })
})

afterAll(async () => {
  try {
    await daemon?.stop()
  } finally {
    unmountCgroup2({ mount, subtree })
    rmSync(scratch, { recursive: true, force: true })
  }
})

const groupOf = (id: string) => join(subtree, daemonCgroupFolder(daemon.home), id)

/** The v2 group a process is in, as the kernel says (/proc/<pid>/cgroup's 0:: line), as a path under the mount. */
function v2GroupOfProcess(pid: number): string | undefined {
  const line = /^0::(.*)$/m.exec(readFileSync(`/proc/${pid}/cgroup`, 'utf8'))?.[1]
  return line === undefined ? undefined : join(mount, line)
}

function readPid(file: string): number | undefined {
  try {
    return Number(readFileSync(file, 'utf8')) || undefined
  } catch {
    return undefined
  }
}

describe('task groups on cgroup v2 (a hybrid host: no controllers on v2)', () => {
  test('status names the v2 subtree, why it is used, and that the limits stay on v1', async () => {
    const status = await daemon.client.status()
    expect(status.sandbox.cgroups.hierarchy).toEqual({
      version: 2,
      path: join(subtree, daemonCgroupFolder(daemon.home)),
      limits: 1,
      why: expect.stringContaining('the folder the operator delegated (cgroupRoot); limits on cgroup v1 memory and pids beside it'),
    })
    expect(status.sandbox.profiles).toContain('strict')
    const printed = await runCli(['status'], daemon.env)
    expect(printed.stdout).toContain(`cgroups:     v2 at ${join(subtree, daemonCgroupFolder(daemon.home))} (limits on v1): the folder the operator delegated`)
  })

  test('a kill leaves no escapee (setsid, double fork, TERM ignored): every one was in the task group, which goes', async () => {
    const dir = mkdtempSync(join(scratch, 'tree-'))
    const task = await daemon.client.start({ command: ['sh', join(FIXTURES, 'escaping-tree.sh'), dir], sandbox: 'off' })
    const pids = await waitFor('the three escapees to write their pids', () => {
      const found = ['setsid', 'orphan', 'ignore-term'].map((name) => readPid(join(dir, `${name}.pid`)))
      return found.every((pid) => pid !== undefined) ? (found as number[]) : undefined
    })
    for (const pid of pids) expect(v2GroupOfProcess(pid)).toBe(groupOf(task.id))
    const killed = await runCli(['kill', task.id, '--json'], daemon.env)
    expect(JSON.parse(killed.stdout)).toMatchObject({ state: 'killed' })
    expect(pids.filter(isAlive)).toEqual([])
    await waitFor('the task group to be removed', () => !existsSync(groupOf(task.id)))
  })

  test("a task whose leader exits while a child lingers is recorded ended with that child gone (cgroup.events' populated 0)", async () => {
    const dir = mkdtempSync(join(scratch, 'linger-'))
    const started = await daemon.client.start({
      // The leader waits for the test's go (the file `go`), then exits; its setsid child lingers.
      command: `setsid sh -c 'echo $$ > ${dir}/child.pid; exec sleep 1000' & while [ ! -e ${dir}/go ]; do sleep 0.01; done`,
      shell: true,
      sandbox: 'off',
    })
    const child = await waitFor('the child to write its pid', () => readPid(join(dir, 'child.pid')))
    expect(v2GroupOfProcess(child)).toBe(groupOf(started.id))
    writeFileSync(join(dir, 'go'), '')
    const ended = await daemon.client.wait(started.id)
    expect(ended).toMatchObject({ state: 'exited', exitCode: 0 })
    expect(isAlive(child)).toBe(false)
    expect(existsSync(groupOf(started.id))).toBe(false)
  })

  test("CPU time comes from the group's cpu.stat: it counts an escapee the task's keeper never reaped", async () => {
    const started = await daemon.client.start({
      // The burner leaves the session; the leader ends once the burner has used a second of CPU.
      command: `setsid sh -c 'while :; do :; done' & pid=$!; while [ "$(awk '{print $14}' /proc/$pid/stat)" -lt 100 ]; do sleep 0.05; done`,
      shell: true,
      sandbox: 'off',
    })
    const ended = await daemon.client.wait(started.id)
    expect(ended.state).toBe('exited')
    const cpuMs = ended.usage!.cpuUserMs + ended.usage!.cpuSystemMs
    expect(cpuMs, JSON.stringify(ended.usage)).toBeGreaterThanOrEqual(900)
  })

  test('a strict task is in its v1 groups (the limits) and its v2 group, and a kill ends it', async () => {
    const started = await daemon.client.start({ command: 'echo ready; exec sleep 1000', shell: true, sandbox: 'strict' })
    await waitFor('the task to print ready', async () => (await daemon.client.read(started.id)).data.includes('ready'))
    const members = (file: string) => readFileSync(file, 'utf8').split('\n').filter(Boolean)
    const inV2 = members(join(groupOf(started.id), 'cgroup.procs'))
    expect(inV2.length).toBeGreaterThan(0)
    const pidsGroup = join('/sys/fs/cgroup/pids/tend/0', daemonCgroupFolder(daemon.home), started.id, 'cgroup.procs')
    expect(members(pidsGroup).sort()).toEqual([...inV2].sort())
    expect(await daemon.client.kill(started.id)).toMatchObject({ state: 'killed' })
    expect(inV2.map(Number).filter(isAlive)).toEqual([])
  })
})

describe('task groups on cgroup v2 with the node spawner (the fallback)', () => {
  test('a task joins its v2 group through cgroup.procs, and a kill leaves none of it', async () => {
    const node = await startTestDaemon({ env: { TEND_CGROUP_ROOT: subtree, TEND_SPAWNER: 'node', TEND_KILL_GRACE: '500ms' } })
    try {
      expect((await node.client.status()).spawner).toBe('node')
      const dir = mkdtempSync(join(scratch, 'node-'))
      const task = await node.client.start({ command: ['sh', join(FIXTURES, 'escaping-tree.sh'), dir], sandbox: 'off' })
      const pids = await waitFor('the three escapees to write their pids', () => {
        const found = ['setsid', 'orphan', 'ignore-term'].map((name) => readPid(join(dir, `${name}.pid`)))
        return found.every((pid) => pid !== undefined) ? (found as number[]) : undefined
      })
      const group = join(subtree, daemonCgroupFolder(node.home), task.id)
      for (const pid of pids) expect(v2GroupOfProcess(pid)).toBe(group)
      expect(await node.client.kill(task.id)).toMatchObject({ state: 'killed' })
      expect(pids.filter(isAlive)).toEqual([])
    } finally {
      await node.stop()
    }
  })
})

describe('task groups on cgroup v2 across a daemon crash', () => {
  test('the next daemon resumes the task in its v2 group and kills it through it; its group goes', async () => {
    const first = await startTestDaemon({ env: { TEND_CGROUP_ROOT: subtree, TEND_KILL_GRACE: '500ms' } })
    let next: TestDaemon | undefined
    try {
      const dir = mkdtempSync(join(scratch, 'crash-'))
      const task = await first.client.start({ command: ['sh', join(FIXTURES, 'escaping-tree.sh'), dir], sandbox: 'off' })
      const pids = await waitFor('the three escapees to write their pids', () => {
        const found = ['setsid', 'orphan', 'ignore-term'].map((name) => readPid(join(dir, `${name}.pid`)))
        return found.every((pid) => pid !== undefined) ? (found as number[]) : undefined
      })
      await first.crash()
      first.client.close()
      next = await startTestDaemon({ home: first.home, env: { TEND_CGROUP_ROOT: subtree, TEND_KILL_GRACE: '500ms' } })
      expect((await next.client.get(task.id)).state).toBe('running')
      expect(pids.filter(isAlive)).toEqual(pids)
      expect(await next.client.kill(task.id)).toMatchObject({ state: 'killed' })
      expect(pids.filter(isAlive)).toEqual([])
      await waitFor('the task group to be removed', () => !existsSync(join(subtree, daemonCgroupFolder(first.home), task.id)))
    } finally {
      await (next ?? first).stop()
    }
  })
})

describe('a cgroup v2 subtree that cannot be used', () => {
  test('status says v1 is used and why: the folder given is not on cgroup2', async () => {
    const notCgroup = mkdtempSync(join(scratch, 'not-cgroup2-'))
    const refused = await startTestDaemon({ env: { TEND_CGROUP_ROOT: notCgroup } })
    try {
      expect((await refused.client.status()).sandbox.cgroups.hierarchy).toMatchObject({
        version: 1,
        why: `the cgroup v2 subtree given is not usable: ${notCgroup} is not on a cgroup2 file system`,
      })
      const printed = await runCli(['status'], refused.env)
      expect(printed.stdout).toContain(`: the cgroup v2 subtree given is not usable: ${notCgroup} is not on a cgroup2 file system`)
    } finally {
      await refused.stop()
    }
  })
})

describe("the daemon's own cgroup (cgroupRoot own), as a unit with Delegate=yes gives it", () => {
  test('the daemon moves to its leaf, makes its task groups beside it, and status says so', async () => {
    // A launcher puts the daemon in a group of its own first, as systemd puts a unit's main process.
    const own = join(subtree, 'own.service')
    mkdirSync(own, { mode: 0o755 })
    const launcher = ['/bin/sh', '-c', `echo $$ > ${join(own, 'cgroup.procs')} && exec "$@"`, 'launcher']
    const daemon = await startTestDaemon({ env: { TEND_CGROUP_ROOT: 'own', TEND_KILL_GRACE: '500ms' }, launcher })
    try {
      const name = `/${relative(mount, own)}`
      expect((await daemon.client.status()).sandbox.cgroups.hierarchy).toMatchObject({
        version: 2,
        why: expect.stringContaining(`the daemon's own cgroup ${name}, delegated to it`),
      })
      expect(readFileSync(`/proc/${daemon.process.pid}/cgroup`, 'utf8')).toContain(`0::${name}/daemon\n`)
      const dir = mkdtempSync(join(scratch, 'own-'))
      const task = await daemon.client.start({ command: ['sh', join(FIXTURES, 'escaping-tree.sh'), dir], sandbox: 'off' })
      const pids = await waitFor('the three escapees to write their pids', () => {
        const found = ['setsid', 'orphan', 'ignore-term'].map((name) => readPid(join(dir, `${name}.pid`)))
        return found.every((pid) => pid !== undefined) ? (found as number[]) : undefined
      })
      for (const pid of pids) expect(v2GroupOfProcess(pid)).toBe(join(own, daemonCgroupFolder(daemon.home), task.id))
      expect(await daemon.client.kill(task.id)).toMatchObject({ state: 'killed' })
      expect(pids.filter(isAlive)).toEqual([])
    } finally {
      await daemon.stop()
    }
  })
})
