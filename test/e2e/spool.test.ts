import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { isTendError, type Task } from '../../client/index.js'
import { FIXTURES, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

const spoolOf = (daemon: TestDaemon, id: string) => join(daemon.home, 'spool', id)

/** Starts a task that keeps running until it is killed, and waits until it runs. */
async function startRunning(daemon: TestDaemon, options: { shellLine?: string } = {}): Promise<Task> {
  const started = await daemon.client.start({ command: options.shellLine ?? 'echo running; exec sleep 600', shell: true })
  return waitFor(`task ${started.id} to be running`, async () => {
    const task = await daemon.client.get(started.id)
    return task.state === 'running' ? task : null
  })
}

async function runToEnd(daemon: TestDaemon, command: string[]): Promise<Task> {
  const started = await daemon.client.start({ command })
  return daemon.client.wait(started.id)
}

describe('rm and gc', () => {
  let daemon: TestDaemon

  beforeAll(async () => {
    daemon = await startTestDaemon()
  })
  afterAll(async () => {
    await daemon?.stop()
  })

  test('rm removes a finished task: its spool folder and its record are gone', async () => {
    const task = await runToEnd(daemon, ['echo', 'to be removed'])
    expect(existsSync(join(task.spool, 'output.log'))).toBe(true)
    const result = await daemon.client.remove(task.id)
    expect(result).toEqual({ removed: task.id, freedBytes: expect.any(Number) })
    expect(result.freedBytes).toBeGreaterThanOrEqual('to be removed\n'.length)
    expect(existsSync(spoolOf(daemon, task.id))).toBe(false)
    const error = await daemon.client.get(task.id).catch((caught: unknown) => caught)
    expect(isTendError(error, 'TEND_ERR_TASK_NOT_FOUND')).toBe(true)
    expect((await daemon.client.list({ all: true })).map((each) => each.id)).not.toContain(task.id)
  })

  test('rm refuses a running task with TEND_ERR_TASK_NOT_FINISHED (409) and leaves it intact', async () => {
    const running = await startRunning(daemon)
    try {
      const error = await daemon.client.remove(running.id).catch((caught: unknown) => caught)
      expect(isTendError(error, 'TEND_ERR_TASK_NOT_FINISHED')).toBe(true)
      expect(error).toMatchObject({ statusCode: 409 })
      expect((error as Error).message).toContain(running.id)
      expect(existsSync(join(running.spool, 'task.json'))).toBe(true)
      expect(existsSync(join(running.spool, 'output.log'))).toBe(true)
      expect(await daemon.client.get(running.id)).toMatchObject({ state: 'running', pid: running.pid })
      await waitFor(`output of ${running.id}`, async () => (await daemon.client.read(running.id)).data === 'running\n')
    } finally {
      await daemon.client.kill(running.id)
    }
    expect((await daemon.client.get(running.id)).state).toBe('killed')
  })

  test('gc with a large age removes nothing, and with age 0 removes every finished task but no running one', async () => {
    const finished = [await runToEnd(daemon, ['echo', 'a']), await runToEnd(daemon, ['echo', 'b'])]
    const running = await startRunning(daemon)
    try {
      expect(await daemon.client.gc({ olderThanMs: 3_600_000 })).toEqual({ removed: [], freedBytes: 0 })
      for (const task of finished) expect(existsSync(task.spool)).toBe(true)

      const result = await daemon.client.gc({ olderThanMs: 0 })
      expect(result.removed).toEqual(expect.arrayContaining(finished.map((task) => task.id)))
      expect(result.removed).not.toContain(running.id)
      for (const task of finished) expect(existsSync(task.spool)).toBe(false)
      expect(existsSync(join(running.spool, 'task.json'))).toBe(true)
      const left = await daemon.client.list({ all: true })
      expect(left.map((task) => task.id)).toEqual([running.id])
    } finally {
      await daemon.client.kill(running.id)
    }
  })

  test('gc removes only the tasks that ended longer ago than the age given', async () => {
    await daemon.client.gc({ olderThanMs: 0 })
    const older = await runToEnd(daemon, ['echo', 'older'])
    const olderEnd = Date.parse(older.endedAt!)
    // A gap between the two endings, so a cut-off can fall between them.
    await waitFor('one second to pass since the older task ended', () => Date.now() - olderEnd >= 1000, 5000)
    const newer = await runToEnd(daemon, ['echo', 'newer'])
    const newerEnd = Date.parse(newer.endedAt!)
    const cutoff = (olderEnd + newerEnd) / 2
    const result = await daemon.client.gc({ olderThanMs: Math.round(Date.now() - cutoff) })
    expect(result.removed).toEqual([older.id])
    expect(existsSync(older.spool)).toBe(false)
    expect(existsSync(newer.spool)).toBe(true)
    expect((await daemon.client.get(newer.id)).state).toBe('exited')
  })
})

describe('the output cap', () => {
  let daemon: TestDaemon

  beforeAll(async () => {
    daemon = await startTestDaemon()
  })
  afterAll(async () => {
    await daemon?.stop()
  })

  test('a task that writes endlessly is killed at its cap and output.log keeps exactly the cap', async () => {
    const started = await daemon.client.start({ command: ['yes'], maxOutputBytes: 10_000 })
    const task = await daemon.client.wait(started.id, { timeoutMs: 20_000 })
    expect(task.state).toBe('killed')
    expect(task.reason).toMatch(/output cap/)
    expect(task.outputBytes).toBe(10_000)
    expect(statSync(join(task.spool, 'output.log')).size).toBe(10_000)
    const read = await daemon.client.read(task.id, { maxBytes: 20_000 })
    expect(read).toMatchObject({ from: 0, next: 10_000, done: true, truncated: false, outputBytes: 10_000 })
    expect(read.data).toBe('y\n'.repeat(5000))
    expect(JSON.parse(readFileSync(join(task.spool, 'task.json'), 'utf8'))).toMatchObject({ state: 'killed', outputBytes: 10_000 })
  })

  test('a task that stays under its cap is not touched by it', async () => {
    const task = await runToEnd(daemon, ['node', join(FIXTURES, 'write-bytes.mjs'), '9999'])
    expect(task).toMatchObject({ state: 'exited', exitCode: 0, outputBytes: 9999, maxOutputBytes: expect.any(Number) })
    const capped = await daemon.client.start({ command: ['node', join(FIXTURES, 'write-bytes.mjs'), '10000'], maxOutputBytes: 10_000 })
    expect(await daemon.client.wait(capped.id)).toMatchObject({ state: 'exited', exitCode: 0, outputBytes: 10_000 })
  })
})

describe('the spool quota', () => {
  let daemon: TestDaemon

  beforeAll(async () => {
    daemon = await startTestDaemon({ env: { TEND_SPOOL_QUOTA: '64k' } })
  })
  afterAll(async () => {
    await daemon?.stop()
  })

  const write40k = () => runToEnd(daemon, ['node', join(FIXTURES, 'write-bytes.mjs'), String(40 * 1024)])

  test('past the quota the oldest finished tasks are deleted, and a running task is never touched', async () => {
    const running = await startRunning(daemon)
    try {
      const first = await write40k()
      expect(first).toMatchObject({ state: 'exited', outputBytes: 40 * 1024 })
      // Under the quota: nothing goes.
      expect(existsSync(first.spool)).toBe(true)

      const second = await write40k()
      await waitFor(`the oldest finished task ${first.id} to be deleted for the quota`, () => !existsSync(first.spool))
      expect(existsSync(second.spool)).toBe(true)
      const error = await daemon.client.get(first.id).catch((caught: unknown) => caught)
      expect(isTendError(error, 'TEND_ERR_TASK_NOT_FOUND')).toBe(true)

      const third = await write40k()
      await waitFor(`the next oldest finished task ${second.id} to be deleted for the quota`, () => !existsSync(second.spool))
      expect(existsSync(third.spool)).toBe(true)

      expect(await daemon.client.get(running.id)).toMatchObject({ state: 'running', pid: running.pid })
      expect(readFileSync(join(running.spool, 'output.log'), 'utf8')).toBe('running\n')
      const status = await daemon.client.status()
      expect(status.spool.quotaBytes).toBe(64 * 1024)
      expect(status.spool.usedBytes).toBeLessThanOrEqual(64 * 1024)
    } finally {
      await daemon.client.kill(running.id)
    }
  })

  test('a running task over the quota by itself keeps its spool; only finished tasks go', async () => {
    // 80k of output and still running: the quota cannot be met, and it must not try with this task.
    const running = await startRunning(daemon, { shellLine: `node '${join(FIXTURES, 'write-bytes.mjs')}' 81920; exec sleep 600` })
    try {
      await waitFor(`the running task ${running.id} to report its 80k`, async () => (await daemon.client.get(running.id)).outputBytes === 81920)
      const finished = await runToEnd(daemon, ['echo', 'small'])
      await waitFor(`the finished task ${finished.id} to be deleted for the quota`, () => !existsSync(finished.spool))
      expect(await daemon.client.get(running.id)).toMatchObject({ state: 'running', outputBytes: 81920 })
      expect(statSync(join(running.spool, 'output.log')).size).toBe(81920)
      expect(existsSync(join(running.spool, 'task.json'))).toBe(true)
    } finally {
      await daemon.client.kill(running.id)
    }
    // Once it has ended it is an ordinary finished task, and the quota takes it like any other.
    await waitFor(`the killed task ${running.id} to be deleted for the quota`, () => !existsSync(running.spool))
  })
})
