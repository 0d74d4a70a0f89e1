import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runCli } from '../helpers/cli.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'

let daemon: TestDaemon
let cwd: string

beforeAll(async () => {
  daemon = await startTestDaemon({ env: { TEND_SANDBOX: 'workspace' } })
  cwd = mkdtempSync(join(tmpdir(), 'tend-cli-messages-'))
})
afterAll(async () => {
  await daemon?.stop()
  rmSync(cwd, { recursive: true, force: true })
})

const run = (...args: string[]) => runCli(['run', '--cwd', cwd, ...args, '--', 'true'], daemon.env)

describe("the CLI names the flags a refused request's fields came from", () => {
  test('a field the schema refuses: --max-output 0', async () => {
    const result = await run('--max-output', '0')
    expect(result.exitCode).toBe(2)
    expect(result.stderr).toBe('tend: --max-output: expected an integer >= 1, got 0\n')
  })

  test('an empty task reference is the ID argument, for tend rm too', async () => {
    const result = await runCli(['rm', ''], daemon.env)
    expect(result.exitCode).toBe(2)
    expect(result.stderr).toBe('tend: ID: must NOT have fewer than 1 characters, got ""\n')
  })

  test('a refusal at admission: --memory without a sandbox names --sandbox', async () => {
    const result = await run('--sandbox', 'off', '--memory', '1g')
    expect(result.exitCode).toBe(2)
    expect(result.stderr).toBe('tend: --memory: limits need --sandbox workspace or strict, got sandbox off\n')
  })

  test('a refusal at admission: --writable without a sandbox', async () => {
    const result = await run('--sandbox', 'off', '--writable', cwd)
    expect(result.exitCode).toBe(2)
    expect(result.stderr).toBe('tend: --writable: writable paths need --sandbox workspace or strict, got sandbox off\n')
  })

  test('a refusal of the path policy: --writable on a system folder, and a network that needs a sandbox', async () => {
    const system = await run('--writable', '/etc')
    expect(system.exitCode).toBe(2)
    expect(system.stderr).toMatch(/^tend: --writable: under sandbox workspace \/etc would become writable, .*or --sandbox off\n$/)
    const network = await run('--sandbox', 'off', '--network', 'loopback')
    expect(network.stderr).toBe("tend: --network: network loopback needs --sandbox workspace or strict; with sandbox off a task has the host's network\n")
  })

  test('an element of a repeated flag and a readiness condition are named by their flags', async () => {
    expect((await run('--allow-net', 'x y')).stderr).toBe('tend: --allow-net: "x y" contains white space: give one pattern per entry\n')
    expect((await run('--ready-http', 'ftp://x')).stderr).toBe('tend: --ready-http: must match pattern "^https?://", got "ftp://x"\n')
    expect((await run('--ready-pattern', '(?=x)')).stderr).toMatch(/^tend: --ready-pattern: not a regular expression tend can match/)
  })

  test("--json keeps the daemon's error whole and adds the flags it is about", async () => {
    const result = await runCli(['--json', 'run', '--cwd', cwd, '--sandbox', 'off', '--memory', '1g', '--', 'true'], daemon.env)
    expect(result.exitCode).toBe(2)
    const { error } = JSON.parse(result.stdout) as { error: Record<string, unknown> }
    expect(error).toMatchObject({
      statusCode: 400,
      code: 'TEND_ERR_VALIDATION',
      message: 'invalid request: body/memoryBytes: limits need sandbox workspace or strict, got sandbox off',
      flags: ['--memory'],
    })
  })
})
