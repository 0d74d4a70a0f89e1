import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { execa } from 'execa'
import { runCli } from '../helpers/cli.js'
import { startTestDaemon, TEND_BIN, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

describe('tend run --stdin and tend send', () => {
  let daemon: TestDaemon
  let scratch: string

  beforeAll(async () => {
    daemon = await startTestDaemon()
    scratch = mkdtempSync('/var/tmp/tend-send-')
  })
  afterAll(async () => {
    await daemon?.stop()
    rmSync(scratch, { recursive: true, force: true })
  })

  async function runPiped(): Promise<string> {
    const result = await runCli(['run', '--stdin', '--cwd', scratch, '--', 'cat'], daemon.env)
    expect(result.exitCode, result.stderr).toBe(0)
    const id = result.stdout.trim()
    await waitFor(`task ${id} running`, async () => (await daemon.client.get(id)).state === 'running')
    return id
  }

  const outputOf = async (id: string) => (await daemon.client.read(id)).data

  test("send TEXT adds a newline, -n does not, --file sends a file as it is, - sends the command's own stdin, --eof ends the task", async () => {
    const id = await runPiped()
    expect((await daemon.client.get(id)).stdin).toBe('pipe')
    const shown = await runCli(['show', id], daemon.env)
    expect(shown.stdout).toMatch(/stdin:\s+pipe \(tend send ID TEXT writes to it\)/)

    const sent = await runCli(['send', id, 'hello'], daemon.env)
    expect(sent).toMatchObject({ exitCode: 0, stderr: '', stdout: `6 bytes sent to ${id}\n` })
    await waitFor('hello echoed', async () => (await outputOf(id)) === 'hello\n')

    expect((await runCli(['send', '-n', id, 'no-newline'], daemon.env)).exitCode).toBe(0)
    const file = join(scratch, 'payload.bin')
    writeFileSync(file, Buffer.from([0x01, 0x02, 0x0a]))
    expect((await runCli(['send', id, '--file', file], daemon.env)).stdout).toBe(`3 bytes sent to ${id}\n`)
    const piped = await execa(process.execPath, [TEND_BIN, 'send', id, '-'], { env: daemon.env, extendEnv: false, reject: false, input: 'from stdin\n' })
    expect(piped.exitCode, piped.stderr).toBe(0)

    const closed = await runCli(['--json', 'send', id, '--eof'], daemon.env)
    expect(closed.exitCode, closed.stderr).toBe(0)
    expect(JSON.parse(closed.stdout)).toMatchObject({ acceptedBytes: 0, eof: true, task: { id, stdin: 'closed' } })
    expect(await daemon.client.wait(id, { timeoutMs: 10_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
    const expected = 'hello\nno-newline\u0001\u0002\nfrom stdin\n'
    expect(await outputOf(id)).toBe(expected)
    expect(readFileSync(join(daemon.home, 'spool', id, 'input.log'), 'utf8')).toBe(expected)
  })

  test('send TEXT --eof writes, then closes; a later send is refused with the reason, exit 1', async () => {
    const id = await runPiped()
    const last = await runCli(['send', id, 'last', '--eof'], daemon.env)
    expect(last.stdout).toBe(`5 bytes sent to ${id}; its stdin is closed\n`)
    await daemon.client.wait(id, { timeoutMs: 10_000 })
    const late = await runCli(['send', id, 'late'], daemon.env)
    expect(late.exitCode).toBe(1)
    expect(late.stderr).toContain(`stdin of task ${id} is closed`)
  })

  test('send to a task without --stdin, and send with nothing to send, say what is wrong', async () => {
    const plain = await runCli(['run', '--cwd', scratch, '--', 'sleep', '30'], daemon.env)
    const id = plain.stdout.trim()
    const refused = await runCli(['send', id, 'x'], daemon.env)
    expect(refused.exitCode).toBe(1)
    expect(refused.stderr).toContain(`task ${id} has no stdin pipe`)
    const usage = await runCli(['send', id], daemon.env)
    expect(usage.exitCode).toBe(2)
    expect(usage.stderr).toContain('nothing to send')
    await daemon.client.kill(id)
  })
})
