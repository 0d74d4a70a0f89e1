import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { execa } from 'execa'
import { setprivArgs, startTestDaemon, TEND_BIN, UNPRIVILEGED_USER, type TestDaemon } from '../helpers/test-daemon.js'

/**
 * A real daemon as the dedicated non-root user (startTestDaemon({ user: 'unprivileged' })): it
 * starts, answers its own user's CLI, runs tasks as that user, and can sandbox them. The helper
 * fails (never skips) when this machine cannot run it; `bash .ci/run` creates the user.
 */
let daemon: TestDaemon
// Sandboxed tasks get a private /tmp, so their cwd lives under /var/tmp; the user owns it.
let workspace: string

beforeAll(async () => {
  daemon = await startTestDaemon({ user: 'unprivileged' })
  workspace = mkdtempSync('/var/tmp/tend-non-root-')
  chownSync(workspace, daemon.uid, daemon.gid)
})
afterAll(async () => {
  await daemon?.stop()
  if (workspace) rmSync(workspace, { recursive: true, force: true })
})

async function runTask(command: string, sandbox: 'off' | 'workspace') {
  const started = await daemon.client.start({ command, shell: true, sandbox, cwd: workspace })
  const task = await daemon.client.wait(started.id, { timeoutMs: 30_000 })
  const output = (await daemon.client.read(task.id)).data
  return { task, output }
}

describe(`a daemon as the non-root user ${UNPRIVILEGED_USER}`, () => {
  test('runs as that uid and gid, with no supplementary groups', () => {
    expect(daemon.uid).toBeGreaterThan(0)
    const status = readFileSync(`/proc/${daemon.process.pid}/status`, 'utf8')
    expect(status).toMatch(new RegExp(`^Uid:\\s+${daemon.uid}\\s+${daemon.uid}\\s+${daemon.uid}\\s+${daemon.uid}$`, 'm'))
    expect(status).toMatch(new RegExp(`^Gid:\\s+${daemon.gid}\\s+${daemon.gid}\\s+${daemon.gid}\\s+${daemon.gid}$`, 'm'))
    expect(status).toMatch(/^Groups:\s*$/m)
    expect(status).toMatch(/^CapEff:\s+0+$/m)
  })

  test('`tend status` (run by that user) answers with the daemon it started as', async () => {
    const result = await execa(
      'setpriv',
      [...setprivArgs({ name: UNPRIVILEGED_USER, uid: daemon.uid, gid: daemon.gid }), '--', process.execPath, TEND_BIN, 'status', '--json'],
      {
        env: daemon.env,
        extendEnv: false,
        reject: false,
        stdin: 'ignore',
        cwd: workspace,
        timeout: 30_000,
      },
    )
    expect(result.exitCode, result.stderr).toBe(0)
    const status = JSON.parse(String(result.stdout))
    expect(status.pid).toBe(daemon.process.pid)
    // Root's client talks to the same socket.
    expect((await daemon.client.status()).pid).toBe(daemon.process.pid)
  })

  test("a sandbox 'off' task runs as that user", async () => {
    const { task, output } = await runTask('id -u; id -g; id -G', 'off')
    expect(task).toMatchObject({ state: 'exited', exitCode: 0 })
    expect(output).toBe(`${daemon.uid}\n${daemon.gid}\n${daemon.gid}\n`)
  })

  for (const sandbox of ['off', 'workspace'] as const) {
    test(`a sandbox '${sandbox}' task with a stdin pipe reads what is sent and ends at its end of input`, async () => {
      const started = await daemon.client.start({ command: 'read line; echo "got $line"; cat', shell: true, sandbox, cwd: workspace, stdin: 'pipe' })
      expect(await daemon.client.input(started.id, 'one\ntwo\n', { eof: true })).toMatchObject({ acceptedBytes: 8, eof: true })
      const task = await daemon.client.wait(started.id, { timeoutMs: 30_000 })
      expect({ ...task, output: (await daemon.client.read(task.id)).data }).toMatchObject({
        state: 'exited',
        exitCode: 0,
        stdin: 'closed',
        output: 'got one\ntwo\n',
      })
    })
  }

  for (const sandbox of ['off', 'workspace'] as const) {
    test(`a sandbox '${sandbox}' task on a terminal sees one, and reads what is typed`, async () => {
      const started = await daemon.client.start({
        command: 'test -t 0 && echo terminal; read line; echo "got $line"',
        shell: true,
        sandbox,
        cwd: workspace,
        tty: true,
      })
      await daemon.client.input(started.id, 'one\n')
      const task = await daemon.client.wait(started.id, { timeoutMs: 30_000 })
      const output = (await daemon.client.read(task.id)).data
      expect({ ...task, output: output.replace('one\r\n', '') }).toMatchObject({ state: 'exited', exitCode: 0, output: 'terminal\r\ngot one\r\n' })
    })
  }

  test("a sandbox 'workspace' task runs", async () => {
    const { task, output } = await runTask('echo ok', 'workspace')
    // On failure the diff shows the whole task (its reason) and the output (bubblewrap's error).
    expect({ ...task, output }).toMatchObject({ sandbox: 'workspace', state: 'exited', exitCode: 0, output: 'ok\n' })
  })
})
