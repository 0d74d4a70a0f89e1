import { beforeAll, describe, expect, test } from 'vitest'
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Task } from '../../client/index.js'
import { callTool, TestAgent, textOf } from '../harness/host.js'
import { pluginPerFile } from '../harness/plugin-per-file.js'
import { runCli } from '../helpers/cli.js'
import { sandboxedCwd } from '../helpers/daemon-per-file.js'

/*
 * Writes that would vanish are said at submission: a --writable path that does not exist (it is
 * skipped), and a command naming a path under /tmp while the task has a private /tmp. On stderr
 * and in --json, kept in the record for tend show, and in the bash tool's result.
 */

const shared = pluginPerFile('cli-warnings', {}, { env: { TEND_SANDBOX: 'workspace' } })

beforeAll(() => {
  // A root daemon's tasks run on a uid of their own, which must reach their cwd.
  chmodSync(shared.workspace, 0o711)
})

describe('writes that would vanish are warned of at submission', () => {
  test('a --writable path that does not exist: on stderr, in the record, and in tend show', async () => {
    const cwd = sandboxedCwd(shared)
    const missing = join(shared.workspace, 'not-there')
    const result = await runCli(['run', '--cwd', cwd, '--writable', missing, '--', 'true'], shared.daemon.env)
    expect(result.exitCode).toBe(0)
    const id = shared.track(result.stdout.trim())
    expect(result.stderr).toBe(`tend: warning: writable path ${missing} does not exist: it was skipped, so the task cannot write there (make it first)\n`)
    const task = await shared.daemon.client.wait(id)
    expect(task.warnings).toEqual([`writable path ${missing} does not exist: it was skipped, so the task cannot write there (make it first)`])
    expect((JSON.parse(readFileSync(join(task.spool, 'task.json'), 'utf8')) as Task).warnings).toEqual(task.warnings)
    const shown = await runCli(['show', id], shared.daemon.env)
    expect(shown.stdout).toContain(`warnings:   writable path ${missing} does not exist`)
  })

  test('a command that names a path under /tmp, sandboxed: said once, in --json too', async () => {
    const cwd = sandboxedCwd(shared)
    const result = await runCli(['--json', 'run', '--cwd', cwd, '-c', 'echo x > /tmp/tend-warning-probe.txt'], shared.daemon.env)
    expect(result.exitCode).toBe(0)
    const started = JSON.parse(result.stdout) as Task
    shared.track(started.id)
    expect(started.warnings).toEqual([
      "the command names /tmp/tend-warning-probe.txt: writes under /tmp stay in the task's private /tmp and are gone when it ends: " +
        'write under its cwd instead, or have that folder made writable for it',
    ])
  })

  test('no warning: /tmp unsandboxed, a path that only ends in /tmp/, a cwd under /tmp, an existing --writable path', async () => {
    const cwd = sandboxedCwd(shared)
    // With sandbox off, /tmp is the host's: a file of the test's own there, removed after.
    const offFile = join(mkdtempSync(join(tmpdir(), 'tend-warning-off-')), 'out.txt')
    const off = await runCli(['run', '--sandbox', 'off', '--cwd', cwd, '-c', `echo x > ${offFile}`], shared.daemon.env)
    expect(off.stderr).toBe('')
    await shared.daemon.client.wait(shared.track(off.stdout.trim()))
    rmSync(join(offFile, '..'), { recursive: true, force: true })
    const elsewhere = await runCli(['run', '--cwd', cwd, '--writable', cwd, '-c', `echo x > ${cwd}/tmp/x; echo y > /var/tmp/z`], shared.daemon.env)
    shared.track(elsewhere.stdout.trim())
    expect(elsewhere.stderr).toBe('')
    expect((await shared.daemon.client.wait(elsewhere.stdout.trim())).warnings).toBeUndefined()
    const underTmp = mkdtempSync(join(tmpdir(), 'tend-warning-cwd-'))
    chmodSync(underTmp, 0o777)
    try {
      const inCwd = await runCli(['run', '--cwd', underTmp, '-c', `echo x > ${underTmp}/kept`], shared.daemon.env)
      expect(inCwd.stderr).toBe('')
      expect(await shared.daemon.client.wait(shared.track(inCwd.stdout.trim()))).toMatchObject({ state: 'exited', exitCode: 0 })
      expect(readFileSync(join(underTmp, 'kept'), 'utf8')).toBe('x\n')
    } finally {
      rmSync(underTmp, { recursive: true, force: true })
    }
  })

  test("the bash tool's result carries the warning", async () => {
    const cwd = sandboxedCwd(shared)
    const text = textOf(
      await callTool(shared.host, new TestAgent('warned'), { name: 'bash', arguments: { command: 'echo x > /tmp/tend-tool-probe.txt', cwd } }),
    )
    expect(text).toContain("[warning: the command names /tmp/tend-tool-probe.txt: writes under /tmp stay in the task's private /tmp")
  })
})
