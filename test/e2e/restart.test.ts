import { afterEach, describe, expect, test } from 'vitest'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createTempHome, FIXTURES, killEverythingOf, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait-for.js'

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

/** However a test ends, the crashed daemon and everything of its home are gone afterwards. */
function cleanUpHome(home: string, first: TestDaemon): void {
  cleanups.push(async () => {
    await killEverythingOf(home)
    rmSync(home, { recursive: true, force: true })
  })
  cleanups.push(async () => {
    if (first.process.exitCode === null && first.process.signalCode === null) await first.crash()
  })
}

describe('restart', () => {
  test('a task whose keeper died with the daemon is recorded lost, and the next daemon kills its leftovers', async () => {
    const home = createTempHome()
    const scratch = mkdtempSync(join(tmpdir(), 'tend-restart-'))
    cleanups.push(() => rmSync(scratch, { recursive: true, force: true }))
    const first = await startTestDaemon({ home })
    cleanUpHome(home, first)
    const done = await first.client.start({ command: ['echo', 'earlier'] })
    await first.client.wait(done.id)
    const running = await first.client.start({ command: ['sh', join(FIXTURES, 'escaping-tree.sh'), scratch] })
    const pids = await waitFor('the escaping tree to start', () => {
      try {
        return ['setsid', 'orphan', 'ignore-term'].map((name) => Number(readFileSync(join(scratch, `${name}.pid`), 'utf8')))
      } catch {
        return undefined
      }
    })
    // The task runs on under its keeper when the daemon dies; killed with the daemon (an OOM kill
    // of both, say), the keeper takes the task's exit status with it: nobody can supervise it.
    const keeper = await waitFor('the running record, with its keeper, on disk', () => {
      const record = JSON.parse(readFileSync(join(home, 'spool', running.id, 'task.json'), 'utf8')) as { state: string; keeper?: { pid: number } }
      return record.state === 'running' ? record.keeper : undefined
    })
    await first.crash()
    process.kill(keeper.pid, 'SIGKILL')
    await waitFor('the keeper to be gone', () => !isAlive(keeper.pid))
    for (const client of [first.client]) client.close()
    // Its task's processes are still there until a new daemon cleans up.
    expect(pids.some(isAlive)).toBe(true)

    const second = await startTestDaemon({ home })
    cleanups.push(() => second.stop())
    const tasks = await second.client.list({ all: true })
    expect(tasks.map((task) => task.id).sort()).toEqual([done.id, running.id].sort())
    expect(tasks.find((task) => task.id === done.id)).toMatchObject({ state: 'exited', exitCode: 0 })
    const lost = tasks.find((task) => task.id === running.id)!
    expect(lost.state).toBe('lost')
    expect(lost.reason).toContain('its keeper is gone without recording how it ended')
    expect(pids.filter(isAlive)).toEqual([])
    expect((await second.client.read(done.id)).data).toBe('earlier\n')
  })

  test('recovery never kills an unrelated process that reuses a lost task pid', async () => {
    const home = createTempHome()
    // An unrelated process, and a spool record claiming a running task with that very pid.
    const bystander = spawn('sleep', ['1000'], { stdio: 'ignore' })
    cleanups.push(() => void bystander.kill('SIGKILL'))
    const id = 'aaaaaaaaaaaa'
    const spool = join(home, 'spool', id)
    mkdirSync(spool, { recursive: true })
    writeFileSync(join(spool, 'output.log'), 'partial\n')
    const now = new Date().toISOString()
    writeFileSync(
      join(spool, 'task.json'),
      JSON.stringify({
        schemaVersion: 1,
        id,
        name: null,
        owner: 'operator',
        command: ['sleep', '1000'],
        shell: false,
        cwd: '/',
        envKeys: [],
        timeoutMs: null,
        maxOutputBytes: 1024,
        outputBytes: 0,
        sandbox: 'off',
        network: 'host',
        writablePaths: [],
        memoryBytes: null,
        pidsMax: null,
        createdAt: now,
        spool,
        state: 'running',
        startedAt: now,
        pid: bystander.pid,
        endedAt: null,
        exitCode: null,
        signal: null,
        reason: null,
      }),
    )
    const daemon: TestDaemon = await startTestDaemon({ home })
    cleanups.push(() => daemon.stop())
    expect(await daemon.client.get(id)).toMatchObject({ state: 'lost', outputBytes: 8 })
    expect(isAlive(bystander.pid!)).toBe(true)
  })

  test('a task that was queued when the daemon died reads failed after a restart', async () => {
    const home = createTempHome()
    const first = await startTestDaemon({ home, env: { TEND_CONCURRENCY: '1' } })
    cleanUpHome(home, first)
    const blocker = await first.client.start({ command: ['sleep', '1000'] })
    const queued = await first.client.start({ command: ['echo', 'never ran'] })
    const blockerRecord = join(home, 'spool', blocker.id, 'task.json')
    await waitFor('the blocker to be recorded running on disk', () => JSON.parse(readFileSync(blockerRecord, 'utf8')).state === 'running')
    await first.crash()
    first.client.close()
    const second = await startTestDaemon({ home })
    cleanups.push(() => second.stop())
    expect(await second.client.get(queued.id)).toMatchObject({ state: 'failed', reason: 'the daemon stopped before the task started' })
    // The running one outlived the daemon under its keeper, and is supervised again.
    expect(await second.client.get(blocker.id)).toMatchObject({ state: 'running' })
    expect((await second.client.kill(blocker.id, { graceMs: 0 })).state).toBe('killed')
  })
})
