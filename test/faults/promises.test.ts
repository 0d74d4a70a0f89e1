import { afterAll, afterEach, describe, expect, test } from 'vitest'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { spawn } from 'node:child_process'
import { rawRequest } from '../helpers/raw-http.js'
import { assertNothingLeft, createTempHome, daemonEnv, killEverythingOf, startTestDaemon, TEND_BIN, type TestDaemon } from '../helpers/test-daemon.js'
import { runCli } from '../helpers/cli.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * What the docs promise, held against what a new user does: an idempotent retry after its task was
 * removed, a home with a long path, a worker whose Redis is not there, a restart under a `tend
 * wait`, a CLI whose reader goes away.
 */

const daemons: TestDaemon[] = []
const scratch: string[] = []
afterEach(async () => {
  while (daemons.length > 0) await daemons.pop()!.stop()
})
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true })
})

function scratchDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tend-promises-'))
  scratch.push(dir)
  return dir
}

async function post(daemon: TestDaemon, key: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const answer = await rawRequest(join(daemon.home, 'tend.sock'), {
    method: 'POST',
    path: '/v1/tasks',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
  })
  return { status: answer.status, json: JSON.parse(answer.text) as Record<string, unknown> }
}

/** A command that appends one line to `file` each time it runs. */
function countedRun(file: string): { command: string[]; cwd: string } {
  return { command: ['sh', '-c', `echo ran >> '${file}'`], cwd: '/' }
}

function runsOf(file: string): number {
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).length
}

describe('an idempotent retry after its task was removed never runs the command again', () => {
  test('removed by tend rm: the retry is refused (410) with the first task and its outcome, also by the next daemon', async () => {
    const home = createTempHome()
    const first = await startTestDaemon({ home })
    const counter = join(scratchDir(), 'runs')
    const body = countedRun(counter)
    const original = await post(first, 'removed-by-rm', body)
    expect(original.status).toBe(201)
    const id = String(original.json.id)
    await first.client.wait(id)
    await first.client.remove(id)
    const retry = await post(first, 'removed-by-rm', body)
    expect(retry).toMatchObject({ status: 410, json: { code: 'TEND_ERR_SUBMISSION_REMOVED' } })
    expect(retry.json.message).toContain(id)
    expect(retry.json.message).toContain('exited 0')
    // The same key with another body is still a conflict, not a removal.
    expect(await post(first, 'removed-by-rm', countedRun(`${counter}-other`))).toMatchObject({ status: 409, json: { code: 'TEND_ERR_IDEMPOTENCY_CONFLICT' } })
    await first.crash()
    first.client.close()
    const second = await startTestDaemon({ home })
    daemons.push(second)
    expect(await post(second, 'removed-by-rm', body)).toMatchObject({ status: 410, json: { code: 'TEND_ERR_SUBMISSION_REMOVED' } })
    expect(readdirSync(join(home, 'spool')).filter((name) => !name.startsWith('.'))).toEqual([])
    expect(runsOf(counter)).toBe(1)
  })

  test('removed by the spool quota, then the daemon crashed: the retry is refused, the command ran once', async () => {
    const home = createTempHome()
    // Any finished task is past a one-byte quota: the quota timer removes each one within a second.
    const first = await startTestDaemon({ home, env: { TEND_SPOOL_QUOTA: '1' } })
    const counter = join(scratchDir(), 'runs')
    const body = countedRun(counter)
    const original = await post(first, 'removed-by-quota', body)
    const id = String(original.json.id)
    await waitFor(`task ${id} removed by the spool quota`, () => !readdirSync(join(home, 'spool')).includes(id), 15_000)
    await first.crash()
    first.client.close()
    const second = await startTestDaemon({ home, env: { TEND_SPOOL_QUOTA: '1' } })
    daemons.push(second)
    const retry = await post(second, 'removed-by-quota', body)
    expect(retry).toMatchObject({ status: 410, json: { code: 'TEND_ERR_SUBMISSION_REMOVED' } })
    expect(retry.json.message).toContain(id)
    expect(runsOf(counter)).toBe(1)
  })

  test('removed by tend gc, another owner with the same key is its own submission', async () => {
    const daemon = await startTestDaemon()
    daemons.push(daemon)
    const counter = join(scratchDir(), 'runs')
    const body = countedRun(counter)
    const original = await post(daemon, 'removed-by-gc', body)
    await daemon.client.wait(String(original.json.id))
    await daemon.client.gc({ olderThanMs: 0 })
    expect(await post(daemon, 'removed-by-gc', body)).toMatchObject({ status: 410, json: { code: 'TEND_ERR_SUBMISSION_REMOVED' } })
    const otherOwner = await post(daemon, 'removed-by-gc', { ...body, owner: 'someone-else' })
    expect(otherOwner.status).toBe(201)
    await daemon.client.wait(String(otherOwner.json.id))
    expect(runsOf(counter)).toBe(2)
  })
})

/**
 * Runs the real CLI with a stdout pipe whose reader goes away: at once (`closeAt: 'start'`), or
 * after the first bytes arrive (a `head -c1`). Resolves with how it ended and its stderr.
 */
function runWithClosingReader(
  args: string[],
  env: Record<string, string>,
  closeAt: 'start' | 'first-bytes',
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> {
  const child = spawn(process.execPath, [TEND_BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  if (closeAt === 'start') child.stdout.destroy()
  else child.stdout.once('data', () => child.stdout.destroy())
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) =>
    child.once('close', (code, signal) => resolve({ code, signal, stderr })),
  )
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`tend ${args.join(' ')} still ran 20 s after its reader went away; stderr: ${stderr}`))
    }, 20_000)
  })
  return Promise.race([ended, expired]).finally(() => clearTimeout(timer))
}

describe('a CLI whose stdout closes early ends quietly', () => {
  test('ps, show, console --no-open and logs -f exit 141 (as SIGPIPE would end them), printing nothing on stderr', async () => {
    const daemon = await startTestDaemon()
    daemons.push(daemon)
    const talker = await daemon.client.start({ command: ['sh', '-c', 'while :; do echo line; done'], cwd: '/' })
    const cases: Array<{ args: string[]; closeAt: 'start' | 'first-bytes' }> = [
      { args: ['ps'], closeAt: 'start' },
      { args: ['ps', '--json'], closeAt: 'start' },
      { args: ['show', talker.id], closeAt: 'start' },
      { args: ['console', '--no-open', '--port', '0'], closeAt: 'start' },
      { args: ['logs', '-f', talker.id], closeAt: 'first-bytes' },
      { args: ['logs', '-f', talker.id], closeAt: 'start' },
    ]
    for (const { args, closeAt } of cases) {
      const ended = await runWithClosingReader(args, daemon.env, closeAt)
      expect({ args, closeAt, ...ended }).toEqual({ args, closeAt, code: 141, signal: null, stderr: '' })
    }
    await daemon.client.kill(talker.id)
  })
})

describe('tend restart under an open tend wait', () => {
  test("the restart returns as soon as the new daemon serves, and the wait prints the task's real end", async () => {
    const home = createTempHome()
    const first = await startTestDaemon({ home })
    // The restarted daemon is no child of this test: stopped (and anything of the home killed) here.
    scratch.push(home)
    const cleanupDaemon = async () => {
      await runCli(['stop'], first.env, { timeoutMs: 40_000 })
      await killEverythingOf(home)
    }
    try {
      const gate = join(scratchDir(), 'go')
      const task = await first.client.start({ command: ['sh', '-c', `while [ ! -e '${gate}' ]; do sleep 0.05; done; echo finishing; exit 7`], cwd: '/' })
      const waiting = spawn(process.execPath, [TEND_BIN, 'wait', task.id], { env: first.env, stdio: ['ignore', 'pipe', 'pipe'] })
      let waitOut = ''
      waiting.stdout.on('data', (chunk: Buffer) => (waitOut += chunk.toString()))
      waiting.stderr.on('data', (chunk: Buffer) => (waitOut += chunk.toString()))
      const waitEnded = new Promise<number | null>((resolve) => waiting.once('close', (code) => resolve(code)))
      // A follower's long-poll on the output, open across the restart too.
      const following = spawn(process.execPath, [TEND_BIN, 'logs', '-f', task.id, '--from', '0'], { env: first.env, stdio: ['ignore', 'pipe', 'pipe'] })
      let followed = ''
      following.stdout.on('data', (chunk: Buffer) => (followed += chunk.toString()))
      following.stderr.on('data', (chunk: Buffer) => (followed += chunk.toString()))
      const followEnded = new Promise<number | null>((resolve) => following.once('close', (code) => resolve(code)))
      await waitFor(
        'the daemon to hold the long-polls of tend wait and tend logs -f open',
        () => {
          const log = readFileSync(join(home, 'daemon.log'), 'utf8')
          return log.includes(`/v1/tasks/${task.id}/wait`) && log.includes(`/v1/tasks/${task.id}/output`)
        },
        15_000,
      )
      const restart = await runCli(['restart'], first.env, { timeoutMs: 60_000 })
      expect(restart).toMatchObject({ exitCode: 0, stderr: '' })
      await waitFor('the first daemon to exit', () => first.process.exitCode !== null || first.process.signalCode !== null, 5_000)
      expect(waiting.exitCode).toBeNull()
      writeFileSync(gate, '')
      expect(await waitEnded).toBe(7)
      expect(waitOut).not.toContain('tend:')
      expect(await followEnded).toBe(0)
      expect(followed).toBe('finishing\n')
    } finally {
      first.client.close()
      await cleanupDaemon()
    }
  }, 120_000)
})

describe('a TEND_HOME whose socket path does not fit a Unix socket address', () => {
  test('tend daemon, tend status and tend run (which would start one) refuse it as a setting error (exit 2) naming the path and the limit, and bind nothing', async () => {
    const base = scratchDir()
    // 108 bytes for sun_path, its NUL included: this home's tend.sock is 120 bytes long.
    const home = join(base, 'h'.repeat(120 - base.length - '/tend.sock'.length - 1))
    mkdirSync(home, { mode: 0o700 })
    const socket = join(home, 'tend.sock')
    expect(Buffer.byteLength(socket)).toBe(120)
    const env = daemonEnv(home)
    for (const args of [['daemon'], ['status'], ['run', '--', 'true']]) {
      const result = await runCli(args, env, { timeoutMs: 30_000 })
      expect({ args, exitCode: result.exitCode }).toEqual({ args, exitCode: 2 })
      expect(result.stderr).toContain(socket)
      expect(result.stderr).toContain('107 bytes')
      expect(result.stderr).not.toMatch(/\n\s+at /)
    }
    // Neither the socket nor what a truncated path would have made beside the home.
    expect(readdirSync(base).sort()).toEqual([basename(home)])
    expect(readdirSync(home).filter((name) => name.endsWith('.sock') || name.startsWith('tend.so'))).toEqual([])
    await assertNothingLeft(home)
  })
})
