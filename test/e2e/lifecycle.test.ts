import { afterEach, describe, expect, test } from 'vitest'
import { readFileSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { TendClient } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { assertNothingLeft, createTempHome, daemonEnv, startTestDaemon } from '../helpers/test-daemon.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait-for.js'

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

const daemonPids = (home: string) =>
  processesWithEnv(`TEND_HOME=${home}`).filter((pid) => isAlive(pid) && readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('daemon'))

describe('daemon lifecycle', () => {
  test('the home folder is 0700 and the socket 0600', async () => {
    const daemon = await startTestDaemon()
    cleanups.push(() => daemon.stop())
    expect(statSync(daemon.home).mode & 0o777).toBe(0o700)
    expect(statSync(join(daemon.home, 'tend.sock')).mode & 0o777).toBe(0o600)
    expect(statSync(join(daemon.home, 'daemon.log')).isFile()).toBe(true)
  })

  test('a second daemon on the same home refuses to start and names the running one', async () => {
    const daemon = await startTestDaemon()
    cleanups.push(() => daemon.stop())
    const second = await runCli(['daemon'], daemon.env)
    expect(second.exitCode).toBe(3)
    expect(second.stderr).toContain(`another daemon is already running on ${daemon.home} (pid ${daemon.process.pid})`)
    expect((await daemon.client.status()).pid).toBe(daemon.process.pid)
  })

  test('SIGTERM stops running tasks, records them, fails queued ones and exits 0', async () => {
    const daemon = await startTestDaemon({ env: { TEND_CONCURRENCY: '1' } })
    cleanups.push(() => daemon.stop())
    const running = await daemon.client.start({ command: ['sh', '-c', 'trap "" TERM; echo started; while :; do sleep 0.05; done'] })
    const queued = await daemon.client.start({ command: ['true'] })
    await waitFor('the task to print started', async () => (await daemon.client.read(running.id)).data === 'started\n')
    const exited = new Promise<number | null>((resolve) => daemon.process.once('exit', (code) => resolve(code)))
    daemon.process.kill('SIGTERM')
    expect(await exited).toBe(0)
    const record = JSON.parse(readFileSync(join(daemon.home, 'spool', running.id, 'task.json'), 'utf8'))
    expect(record).toMatchObject({ state: 'killed', signal: 'SIGKILL', reason: 'daemon stopped' })
    const queuedRecord = JSON.parse(readFileSync(join(daemon.home, 'spool', queued.id, 'task.json'), 'utf8'))
    expect(queuedRecord).toMatchObject({ state: 'failed', reason: 'daemon stopped before the task started' })
  })

  test('a second SIGTERM or a SIGINT while it stops does not cut the stop short: the task is still recorded, nothing is left', async () => {
    const daemon = await startTestDaemon()
    cleanups.push(() => daemon.stop())
    const running = await daemon.client.start({ command: ['sh', '-c', 'trap "" TERM; echo started; while :; do sleep 0.05; done'] })
    await waitFor('the task to print started', async () => (await daemon.client.read(running.id)).data === 'started\n')
    const exited = new Promise<object>((resolve) => daemon.process.once('exit', (code, signal) => resolve({ code, signal })))
    daemon.process.kill('SIGTERM')
    // The task ignores TERM, so the stop lasts the kill grace (1 s): both signals land inside it.
    await waitFor('the daemon to begin its stop', () => readFileSync(join(daemon.home, 'daemon.log'), 'utf8').includes('daemon stopping'))
    daemon.process.kill('SIGTERM')
    daemon.process.kill('SIGINT')
    expect(await exited).toEqual({ code: 0, signal: null })
    const record = JSON.parse(readFileSync(join(daemon.home, 'spool', running.id, 'task.json'), 'utf8'))
    expect(record).toMatchObject({ state: 'killed', reason: 'daemon stopped' })
  })

  test('two clients racing to start a daemon leave exactly one running', async () => {
    const home = createTempHome()
    const env = daemonEnv(home)
    const clients = [new TendClient({ env }), new TendClient({ env }), new TendClient({ env })]
    cleanups.push(async () => {
      for (const client of clients) client.close()
      await runCli(['stop'], env)
      await assertNothingLeft(home)
      rmSync(home, { recursive: true, force: true })
    })
    const statuses = await Promise.all(clients.map((client) => client.status()))
    expect(new Set(statuses.map((status) => status.pid)).size).toBe(1)
    // The losers may still be loading when the winner answers; they must exit on their own.
    await waitFor('the daemons that lost the race to exit', () => daemonPids(home).length === 1)
    expect(daemonPids(home)).toEqual([statuses[0]!.pid])
  })

  test('tend stop stops the daemon and a later command starts a new one', async () => {
    const home = createTempHome()
    const env = daemonEnv(home)
    cleanups.push(async () => {
      await runCli(['stop'], env)
      await assertNothingLeft(home)
      rmSync(home, { recursive: true, force: true })
    })
    const first = await runCli(['status', '--json'], env)
    expect(first.exitCode).toBe(0)
    const firstPid = JSON.parse(first.stdout).pid as number
    const stop = await runCli(['stop'], env)
    expect(stop).toMatchObject({ exitCode: 0, stdout: `daemon stopped (pid ${firstPid})\n` })
    expect(isAlive(firstPid)).toBe(false)
    const again = await runCli(['stop'], env)
    expect(again).toMatchObject({ exitCode: 0, stdout: 'no daemon running\n' })
    const second = await runCli(['ps', '--all', '--json'], env)
    expect(second.exitCode).toBe(0)
    expect(daemonPids(home)).toHaveLength(1)
  })

  test('an invalid configuration is refused with every violation listed', async () => {
    const home = createTempHome()
    cleanups.push(() => rmSync(home, { recursive: true, force: true }))
    const result = await runCli(
      ['daemon'],
      daemonEnv(home, { TEND_CONCURRENCY: '0', TEND_MAX_OUTPUT: 'lots', TEND_SANDBOX: 'bogus', TEND_WRITABLE_PATHS: 'relative' }),
    )
    expect(result.exitCode).toBe(2)
    expect(result.stderr).toContain('invalid configuration')
    expect(result.stderr).toContain('TEND_MAX_OUTPUT')
    expect(result.stderr).toContain('TEND_CONCURRENCY=0: concurrency must be >= 1')
    expect(result.stderr).toContain('TEND_SANDBOX=bogus: sandbox must be one of off, workspace, strict')
    expect(result.stderr).toContain('TEND_WRITABLE_PATHS=relative: writablePaths/0 must match pattern "^/"')
  })
})
