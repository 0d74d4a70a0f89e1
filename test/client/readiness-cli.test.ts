import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import type { Task } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { freePort } from '../helpers/ports.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'

/* `tend run --ready-*`, `tend run --wait-ready`, `tend wait --ready` and `tend show`'s readiness, through the real executable. */

describe('tend run --ready-*, --wait-ready; tend wait --ready', () => {
  let daemon: TestDaemon
  beforeAll(async () => {
    daemon = await startTestDaemon()
  })
  // Servers and sleepers are stopped after each test: they would hold the daemon's slots.
  afterEach(async () => {
    for (const task of await daemon.client.list()) await daemon.client.kill(task.id).catch(() => undefined)
  })
  afterAll(async () => {
    await daemon?.stop()
  })

  test('run --wait-ready --ready-port returns once the server listens, and show prints how it became ready', async () => {
    const port = await freePort()
    const result = await runCli(
      ['run', '--wait-ready', '--ready-port', String(port), '--ready-timeout', '30s', '-c', `sleep 0.3; exec python3 -m http.server --bind 127.0.0.1 ${port}`],
      daemon.env,
    )
    expect(result.stderr).toBe('')
    expect(result.exitCode).toBe(0)
    const id = result.stdout.trim()
    const task = await daemon.client.get(id)
    expect(task).toMatchObject({ state: 'running', readyWhen: { port, timeoutMs: 30_000 }, ready: { by: 'port' } })
    const shown = await runCli(['show', id], daemon.env)
    expect(shown.stdout).toMatch(new RegExp(`ready when: +port ${port} \\(within 30s\\)`))
    expect(shown.stdout).toMatch(/ready: +yes, by port, at /)
  })

  test('run --wait-ready --json prints the record once the line came, with the line', async () => {
    const result = await runCli(
      ['run', '--wait-ready', '--json', '--ready-pattern', 'listening on \\d+', '-c', 'echo listening on 8080; exec sleep 60'],
      daemon.env,
    )
    expect(result.exitCode).toBe(0)
    const task = JSON.parse(result.stdout) as Task
    expect(task).toMatchObject({ state: 'running', ready: { by: 'pattern', line: 'listening on 8080' } })
  })

  test('run --wait-ready exits 76 with a message when the condition times out, 77 when the task ends first', async () => {
    const timedOut = await runCli(['run', '--wait-ready', '--ready-pattern', 'never', '--ready-timeout', '300ms', '--', 'sleep', '60'], daemon.env)
    expect(timedOut.exitCode).toBe(76)
    expect(timedOut.stderr).toMatch(/tend: task \w+ was not ready within 300ms: no line of its output matched "never" \(it runs on\)/)
    const endedFirst = await runCli(['run', '--wait-ready', '--ready-http', 'http://127.0.0.1:9/', '-c', 'exit 4'], daemon.env)
    expect(endedFirst.exitCode).toBe(77)
    expect(endedFirst.stderr).toMatch(/tend: task \w+ exited \(code 4\) before it was ready/)
  })

  test('wait --ready: 0 once ready, 77 when it ended first, 75 when its own --timeout passes, a usage error for a task without a condition', async () => {
    const ready = await daemon.client.start({ command: 'echo up; exec sleep 60', shell: true, ready: { pattern: '^up$' } })
    expect(await runCli(['wait', '--ready', ready.id], daemon.env)).toMatchObject({ exitCode: 0 })
    const ended = await daemon.client.start({ command: ['true'], ready: { port: await freePort() } })
    const endedFirst = await runCli(['wait', '--ready', ended.id], daemon.env)
    expect(endedFirst.exitCode).toBe(77)
    expect(endedFirst.stderr).toMatch(/before it was ready/)
    const waiting = await daemon.client.start({ command: ['sleep', '60'], ready: { pattern: 'never' } })
    const gaveUp = await runCli(['wait', '--ready', '--timeout', '200ms', waiting.id], daemon.env)
    expect(gaveUp.exitCode).toBe(75)
    expect(gaveUp.stderr).toMatch(/is not ready yet after the --timeout/)
    const plain = await daemon.client.start({ command: ['true'] })
    const refused = await runCli(['wait', '--ready', plain.id], daemon.env)
    expect(refused.exitCode).toBe(2)
    expect(refused.stderr).toMatch(/has no readiness condition/)
  })

  test('run refuses two conditions at once, and a readiness flag without a condition', async () => {
    const both = await runCli(['run', '--ready-port', '80', '--ready-pattern', 'x', '--', 'true'], daemon.env)
    expect(both.exitCode).toBe(2)
    expect(both.stderr).toMatch(/--ready-pattern, --ready-port and --ready-http: give one/)
    const lonely = await runCli(['run', '--wait-ready', '--', 'true'], daemon.env)
    expect(lonely.exitCode).toBe(2)
    expect(lonely.stderr).toMatch(/--wait-ready needs a condition/)
  })
})
