import { beforeAll, describe, expect, test } from 'vitest'
import { chmodSync } from 'node:fs'
import { join } from 'node:path'
import { runCli } from '../helpers/cli.js'
import { daemonPerFile, sandboxedCwd } from '../helpers/daemon-per-file.js'

/*
 * The CLI's sandbox hint comes only with a failure the sandbox plausibly caused: a refusal in the
 * end of the task's output (or the egress proxy's, in its record), never with any non-zero exit.
 */

const shared = daemonPerFile('cli-sandbox-hint', { env: { TEND_SANDBOX: 'workspace' } })

let probes = 0

beforeAll(() => {
  // A root daemon's tasks run on a uid of their own, which must reach their cwd.
  chmodSync(shared.workspace, 0o711)
})

/** run --wait, then wait and show of the same task: each one's stderr. */
async function everyAnswer(line: string): Promise<{ exitCode: number; run: string; wait: string; show: string }> {
  const cwd = sandboxedCwd(shared)
  const name = `hint-probe-${++probes}`
  const run = await runCli(['run', '--wait', '--name', name, '--cwd', cwd, '-c', line], shared.daemon.env)
  expect(run.stderr).not.toMatch(/^tend: (?!ran in sandbox)/m)
  const id = shared.track(await shared.daemon.client.resolve(name))
  const wait = await runCli(['wait', id], shared.daemon.env)
  const show = await runCli(['show', id], shared.daemon.env)
  return { exitCode: run.exitCode, run: run.stderr, wait: wait.stderr, show: show.stderr }
}

describe('the sandbox hint of tend run --wait, wait and show', () => {
  test('a command that fails on its own (echo hi; exit 3) gets no hint', async () => {
    const answers = await everyAnswer('echo hi; exit 3')
    expect(answers.exitCode).toBe(3)
    for (const stderr of [answers.run, answers.wait, answers.show]) expect(stderr).not.toContain('ran in sandbox')
  })

  test('a write the read-only file system refused (touch /usr/x) gets the hint, with the flags that allow more', async () => {
    const answers = await everyAnswer('touch /usr/tend-hint-probe')
    expect(answers.exitCode).not.toBe(0)
    for (const stderr of [answers.run, answers.wait, answers.show]) {
      expect(stderr).toMatch(/^tend: ran in sandbox workspace: it could write only .* To allow more: --writable PATH, --network allow, --net, --sandbox off$/m)
    }
  })

  test('a write to a folder outside the writable places gets the hint', async () => {
    const answers = await everyAnswer('echo x > /var/tmp/tend-hint-outside-probe; exit 1')
    expect(answers.exitCode).toBe(1)
    expect(answers.run).toContain('tend: ran in sandbox workspace')
  })

  test('a task that failed to start in a missing cwd gets no hint: its error says the cwd is missing', async () => {
    const missing = join(shared.workspace, 'missing')
    const result = await runCli(['run', '--wait', '--cwd', missing, '--', 'true'], shared.daemon.env)
    expect(result.exitCode).toBe(127)
    expect(result.stderr).toContain(`cwd does not exist: ${missing}`)
    expect(result.stderr).not.toContain('ran in sandbox')
    expect(result.stderr).not.toContain('nothing of the host')
  })
})
