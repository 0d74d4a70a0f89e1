import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { findCgroupRoots } from '../../daemon/sandbox/index.js'
import { endingText } from '../../tools/core/render.js'
import { runCli } from '../helpers/cli.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'

/*
 * A sandboxed task that fails explains itself: one line outside its output names the profile,
 * what it could write, and the flags that allow more (CLI and agent tools); output.log stays what
 * the task wrote. And where strict cannot run, status says how to make it run.
 */

let daemon: TestDaemon
const base = mkdtempSync('/var/tmp/tend-explain-')
// Others may enter it: a root daemon's tasks run on a uid of their own, which must reach their cwd.
chmodSync(base, 0o711)

beforeAll(async () => {
  daemon = await startTestDaemon({ env: { TEND_SANDBOX: 'workspace' } })
})
afterAll(async () => {
  await daemon?.stop()
  rmSync(base, { recursive: true, force: true })
})

const FAILING = 'echo before; echo x > /var/tmp/outside-the-workspace-probe; echo after; exit 3'

describe('a failing sandboxed task explains its sandbox', () => {
  test('run --wait: the output is streamed as written, the exit code passed on, and one line on stderr says what the sandbox allowed', async () => {
    const cwd = mkdtempSync(join(base, 'ws-'))
    const result = await runCli(['run', '--wait', '--cwd', cwd, '-c', FAILING], daemon.env)
    expect(result.exitCode).toBe(3)
    // stdout and stderr share output.log: the task's own complaint is part of its output.
    expect(result.stdout).toMatch(/^before\n.*Read-only file system\nafter\n$/s)
    const hints = result.stderr.split('\n').filter((line) => line.startsWith('tend: ran in sandbox workspace'))
    expect(hints).toHaveLength(1)
    expect(hints[0]).toContain(`could write only ${cwd}`)
    expect(hints[0]).toContain('network: its loopback only')
    expect(hints[0]).toMatch(/--writable PATH, --network allow, --net, --sandbox off/)
    // output.log is byte for byte what the task wrote: the hint is not in it.
    const [id] = (await daemon.client.list({ all: true })).filter((task) => task.cwd === cwd).map((task) => task.id)
    const task = await daemon.client.get(id!)
    expect(readFileSync(join(task.spool, 'output.log'), 'utf8')).toMatch(/^before\n.*Read-only file system\nafter\n$/s)
    expect(task.sandboxWritable).toEqual([cwd])

    const waited = await runCli(['wait', id!], daemon.env)
    expect(waited.exitCode).toBe(3)
    expect(waited.stderr).toContain('tend: ran in sandbox workspace')
    const shown = await runCli(['show', id!], daemon.env)
    expect(shown.stdout).toContain(`can write:  ${cwd}`)
    expect(shown.stderr).toContain('tend: ran in sandbox workspace')
  })

  test('a task that succeeds, or runs unsandboxed, gets no such line', async () => {
    const cwd = mkdtempSync(join(base, 'ws-'))
    const ok = await runCli(['run', '--wait', '--cwd', cwd, '-c', 'echo fine'], daemon.env)
    expect(ok).toMatchObject({ exitCode: 0, stdout: 'fine\n' })
    expect(ok.stderr).not.toContain('ran in sandbox')
    const off = await runCli(['run', '--wait', '--sandbox', 'off', '--cwd', cwd, '-c', 'exit 4'], daemon.env)
    expect(off.exitCode).toBe(4)
    expect(off.stderr).not.toContain('ran in sandbox')
  })

  test("the agent tools' ending line carries the same explanation", async () => {
    const cwd = mkdtempSync(join(base, 'ws-'))
    const started = await daemon.client.start({ command: FAILING, shell: true, cwd })
    const task = await daemon.client.wait(started.id, { timeoutMs: 20_000 })
    const text = endingText(task, undefined, (await daemon.client.read(started.id)).data)
    expect(text.split('\n')[0]).toBe('[exit code: 3]')
    expect(text).toContain(`[ran in sandbox workspace: it could write only ${cwd}`)
  })
})

describe('where strict cannot run, status says how to make it run', () => {
  test('controllers that are not mounted on a unified (v2) host: a delegated v2 subtree first, then the v1 mount commands', () => {
    const cgroupBase = mkdtempSync(join(base, 'cgroup-'))
    writeFileSync(join(cgroupBase, 'cgroup.controllers'), 'cpu memory pids\n')
    const roots = findCgroupRoots({ name: 'tend', uid: 0, daemon: 'home-test', cgroupBase })
    expect(roots).toMatchObject({ memory: null, pids: null })
    expect(roots.problem).toContain(`mount -t cgroup -o memory cgroup ${cgroupBase}/memory`)
    expect(roots.problem).toContain(`mount -t cgroup -o pids cgroup ${cgroupBase}/pids`)
    expect(roots.problem).toContain('This machine runs the unified cgroup v2 hierarchy: give the daemon a delegated v2 subtree')
    expect(roots.problem).toContain('tend service install')
    expect(roots.problem).toContain('cgroupRoot')
    expect(roots.problem).not.toContain('systemd.unified_cgroup_hierarchy=0')
  })

  test('a folder that only looks like a controller (not cgroupfs) is not used, and nothing is made in it', () => {
    const cgroupBase = mkdtempSync(join(base, 'cgroup-'))
    mkdirSync(join(cgroupBase, 'pids'))
    writeFileSync(join(cgroupBase, 'pids', 'cgroup.procs'), '')
    const roots = findCgroupRoots({ name: 'tend', uid: 0, daemon: 'home-test', cgroupBase })
    expect(roots.pids).toBeNull()
    expect(roots.problem).toContain(`${cgroupBase}/pids is not a cgroup file system`)
    expect(readdirSync(join(cgroupBase, 'pids'))).toEqual(['cgroup.procs'])
  })
})
