import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { StartOptions } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { REPO_ROOT, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'

/*
 * Fallback and refusal: with bubblewrap hidden from PATH the daemon still starts, says what it
 * cannot enforce and why, refuses every sandboxed task (never runs it with less confinement),
 * and runs `--sandbox off` tasks. util-linux `unshare` is on that PATH on purpose: it is no
 * substitute (docs/sandbox.md says why), so tend refuses rather than fall back to it.
 */

/** What a PATH without bubblewrap needs for the tasks and checks below. */
const TOOLS = ['sh', 'true', 'echo', 'cat', 'sleep', 'env', 'ls', 'unshare']

function toolPath(tool: string): string {
  for (const dir of ['/usr/bin', '/bin']) if (existsSync(join(dir, tool))) return join(dir, tool)
  throw new Error(`${tool} not found in /usr/bin or /bin`)
}

/** Task records in a home's spool (there must be none after a refusal). */
const spoolEntries = (home: string) => (existsSync(join(home, 'spool')) ? readdirSync(join(home, 'spool')) : [])

describe('bubblewrap hidden from PATH', () => {
  let daemon: TestDaemon
  let bin: string
  let workspace: string

  beforeAll(async () => {
    bin = mkdtempSync(join(tmpdir(), 'tend-nobwrap-bin-'))
    for (const tool of TOOLS) symlinkSync(toolPath(tool), join(bin, tool))
    workspace = mkdtempSync(join(tmpdir(), 'tend-nobwrap-ws-'))
    // The real default (workspace): tasks that do not choose a profile must be refused too.
    daemon = await startTestDaemon({ env: { PATH: bin, TEND_SANDBOX: 'workspace' } })
  })
  afterAll(async () => {
    await daemon?.stop()
    rmSync(bin, { recursive: true, force: true })
    rmSync(workspace, { recursive: true, force: true })
  })

  test('the PATH has the tools and unshare, but no bwrap', () => {
    expect(existsSync(join(bin, 'unshare'))).toBe(true)
    expect(existsSync(join(bin, 'bwrap'))).toBe(false)
  })

  test('status says workspace and strict are unavailable, why, and how to install bubblewrap', async () => {
    const status = await daemon.client.status()
    expect(status.sandbox).toMatchObject({ default: 'workspace', profiles: ['off'], bubblewrap: null })
    for (const profile of ['workspace', 'strict'] as const) {
      expect(status.sandbox.missing[profile]).toContain('bubblewrap (bwrap) was not found on PATH')
      expect(status.sandbox.missing[profile]).toContain('apt-get install bubblewrap')
    }
    const cli = await runCli(['status'], daemon.env)
    expect(cli.exitCode).toBe(0)
    expect(cli.stdout).toContain('can enforce off\n')
    expect(cli.stdout).toMatch(/workspace unavailable: bubblewrap \(bwrap\) was not found on PATH: install it \(Debian\/Ubuntu: apt-get install bubblewrap\)/)
    expect(cli.stdout).toMatch(/strict unavailable: bubblewrap \(bwrap\) was not found on PATH/)
  })

  test('a workspace, strict or default-profile task is refused, naming what is missing, and no task record is created', async () => {
    for (const sandbox of ['workspace', 'strict', undefined] as const) {
      const refused = daemon.client.start({ command: ['echo', 'never'], cwd: workspace, sandbox })
      await expect(refused).rejects.toMatchObject({ code: 'TEND_ERR_SANDBOX_UNAVAILABLE', statusCode: 503 })
      const error = await refused.catch((caught: Error) => caught)
      expect((error as Error).message).toContain(`sandbox ${sandbox ?? 'workspace'} is not available here`)
      expect((error as Error).message).toContain('bubblewrap (bwrap) was not found on PATH')
      expect((error as Error).message).toContain('apt-get install bubblewrap')
    }
    expect(await daemon.client.list({ all: true })).toEqual([])
    expect(spoolEntries(daemon.home)).toEqual([])
  })

  test('util-linux unshare on PATH is not used as a fallback (and docs/sandbox.md says why)', async () => {
    await expect(daemon.client.start({ command: ['true'], cwd: workspace, sandbox: 'workspace' })).rejects.toMatchObject({
      code: 'TEND_ERR_SANDBOX_UNAVAILABLE',
    })
    const docs = readFileSync(join(REPO_ROOT, 'docs', 'sandbox.md'), 'utf8')
    const section = docs.slice(docs.indexOf('## Why not util-linux `unshare`'))
    expect(section).toMatch(/^## Why not util-linux `unshare`/)
    expect(section).toMatch(/read-only/)
    expect(section).toMatch(/refuse/)
    expect(spoolEntries(daemon.home)).toEqual([])
  })

  test('sandbox off still runs, and records that it ran unconfined', async () => {
    const started = await daemon.client.start({ command: ['echo', 'hello from off'], cwd: workspace, sandbox: 'off' })
    const task = await daemon.client.wait(started.id)
    expect(task).toMatchObject({ state: 'exited', exitCode: 0, sandbox: 'off', network: 'host', memoryBytes: null, pidsMax: null })
    expect((await daemon.client.read(task.id)).data).toBe('hello from off\n')
    await daemon.client.remove(task.id)
  })

  test('`tend run --sandbox workspace` (and plain `tend run`) exit non-zero with the message; `--sandbox off` runs', async () => {
    for (const args of [['--sandbox', 'workspace'], ['--sandbox', 'strict'], []]) {
      const refused = await runCli(['run', ...args, '--cwd', workspace, '--', 'echo', 'never'], daemon.env)
      expect(refused.exitCode).toBe(1)
      expect(refused.stdout).toBe('')
      expect(refused.stderr).toMatch(
        /^tend: sandbox (workspace|strict) is not available here: bubblewrap \(bwrap\) was not found on PATH: install it \(Debian\/Ubuntu: apt-get install bubblewrap\), or run the task with --sandbox off\n$/,
      )
    }
    expect(spoolEntries(daemon.home)).toEqual([])
    const off = await runCli(['run', '--sandbox', 'off', '--wait', '--cwd', workspace, '--', 'echo', 'ran'], daemon.env)
    expect(off).toMatchObject({ exitCode: 0, stdout: 'ran\n' })
  })

  test('limits without a sandbox are refused before anything runs (memoryBytes with sandbox off)', async () => {
    const before = spoolEntries(daemon.home)
    await expect(daemon.client.start({ command: ['true'], cwd: workspace, sandbox: 'off', memoryBytes: 64 * 1024 * 1024 })).rejects.toMatchObject({
      code: 'TEND_ERR_VALIDATION',
      statusCode: 400,
      message: expect.stringContaining('memoryBytes: limits need sandbox workspace or strict, got sandbox off'),
    })
    expect(spoolEntries(daemon.home)).toEqual(before)
  })
})

describe('limits and sandbox options need the right profile (bubblewrap present)', () => {
  let daemon: TestDaemon
  let workspace: string

  beforeAll(async () => {
    workspace = mkdtempSync(join(tmpdir(), 'tend-limits-ws-'))
    daemon = await startTestDaemon({ env: { TEND_SANDBOX: 'workspace' } })
  })
  afterAll(async () => {
    await daemon?.stop()
    rmSync(workspace, { recursive: true, force: true })
  })

  test('memoryBytes or pidsMax with sandbox off are refused with 400 naming the field; no task record is created', async () => {
    const status = await daemon.client.status()
    expect(status.sandbox.profiles, `workspace unavailable: ${status.sandbox.missing.workspace}`).toContain('workspace')
    const cases: Array<[Partial<StartOptions>, string]> = [
      [{ sandbox: 'off', memoryBytes: 64 * 1024 * 1024 }, 'body/memoryBytes: limits need sandbox workspace or strict, got sandbox off'],
      [{ sandbox: 'off', pidsMax: 32 }, 'body/pidsMax: limits need sandbox workspace or strict, got sandbox off'],
      [{ sandbox: 'off', writablePaths: [workspace] }, 'body/writablePaths: writable paths need a sandbox'],
      [{ sandbox: 'off', network: false }, 'body/network: network loopback needs a sandbox'],
      [{ sandbox: 'off', network: 'allow' }, 'body/network: network allow needs a sandbox'],
    ]
    for (const [options, message] of cases) {
      await expect(daemon.client.start({ command: ['true'], cwd: workspace, ...options })).rejects.toMatchObject({
        code: 'TEND_ERR_VALIDATION',
        statusCode: 400,
        message: expect.stringContaining(message),
      })
    }
    expect(await daemon.client.list({ all: true })).toEqual([])
    expect(spoolEntries(daemon.home)).toEqual([])
  })

  test('`tend run --memory 64M --sandbox off` exits 2 naming the flags the user typed', async () => {
    const cli = await runCli(['run', '--memory', '64M', '--sandbox', 'off', '--cwd', workspace, '--', 'true'], daemon.env)
    expect(cli.exitCode).toBe(2)
    expect(cli.stderr).toContain('--memory: limits need --sandbox workspace or strict, got sandbox off')
    expect(spoolEntries(daemon.home)).toEqual([])
  })
})
