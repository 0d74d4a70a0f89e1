import { afterEach, describe, expect, test } from 'vitest'
import { existsSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { TendClient, type Task } from '../../client/index.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { createTempHome, daemonEnv, FIXTURES, killEverythingOf, startTestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * Races and crashes: every task ends with exactly one truthful final state, a crash in the middle
 * of submissions neither duplicates nor loses a record, and output survives byte for byte.
 */

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

/** Kills whatever is left of a home (a crashed daemon, its tasks) and deletes it. */
function removeHomeAfterwards(home: string): void {
  cleanups.push(async () => {
    await killEverythingOf(home)
    rmSync(home, { recursive: true, force: true })
  })
}

/** Every task.json in the spool (a folder whose record a crash kept from being written holds no output either). */
function records(home: string): Task[] {
  const spool = join(home, 'spool')
  const found: Task[] = []
  for (const id of readdirSync(spool)) {
    const record = join(spool, id, 'task.json')
    if (existsSync(record)) found.push(JSON.parse(readFileSync(record, 'utf8')) as Task)
    else expect(statSync(join(spool, id, 'output.log')).size, `${id} has output but no record`).toBe(0)
  }
  return found
}

function daemonPid(home: string): number {
  return Number(readFileSync(join(home, 'daemon.pid'), 'utf8'))
}

/** The bytes test/fixtures/write-bytes.mjs writes, up to `length`. */
function expectedBytes(length: number): Buffer {
  const bytes = Buffer.alloc(Math.ceil(length / 4) * 4)
  // One xorshift state runs through the whole stream (write-bytes.mjs refills 1 MiB chunks from it).
  let state = 0x12345678
  for (let index = 0; index < bytes.length; index += 4) {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    bytes.writeInt32LE(state | 0, index)
  }
  return bytes.subarray(0, length)
}

describe('a kill racing the exit', () => {
  test('200 kills sent as tasks exit: each ends exactly once, truthfully (an exit is exited, a kill is killed with its signal)', async () => {
    const daemon = await startTestDaemon({ env: { TEND_CONCURRENCY: '16', TEND_PER_OWNER_CONCURRENCY: '16' } })
    cleanups.push(() => daemon.stop())
    const ended: Task[] = []
    for (let round = 0; round < 10; round++) {
      const batch = await Promise.all(
        Array.from({ length: 20 }, (_, index) => daemon.client.start({ command: index % 2 === 0 ? ['true'] : ['sh', '-c', 'exit 0'] })),
      )
      // Kills at once, while the tasks start and exit.
      const killed = await Promise.all(batch.map((task) => daemon.client.kill(task.id, { graceMs: 0 })))
      for (const task of killed) ended.push(await daemon.client.wait(task.id))
    }
    expect(ended).toHaveLength(200)
    for (const task of ended) {
      const truthful =
        (task.state === 'exited' && task.exitCode === 0 && task.signal === null && task.reason === null) ||
        (task.state === 'killed' && task.signal !== null) ||
        (task.state === 'killed' && task.startedAt === null && task.reason === 'killed before it started')
      expect(truthful, JSON.stringify(task)).toBe(true)
    }
    // What each answered is what its record says, and nothing was announced twice.
    const onDisk = new Map(records(daemon.home).map((task) => [task.id, task]))
    for (const task of ended) expect(onDisk.get(task.id)).toMatchObject({ state: task.state, exitCode: task.exitCode, signal: task.signal })
    expect(readFileSync(join(daemon.home, 'daemon.log'), 'utf8')).not.toContain('illegal task transition')
  })
})

describe('tend stop during launches', () => {
  test('50 tasks being launched when the daemon stops: a task that ran is never recorded as never started', async () => {
    for (let round = 0; round < 3; round++) {
      const daemon = await startTestDaemon({ env: { TEND_CONCURRENCY: '50', TEND_PER_OWNER_CONCURRENCY: '50' } })
      removeHomeAfterwards(daemon.home)
      const started = await Promise.all(Array.from({ length: 50 }, () => daemon.client.start({ command: ['sh', '-c', 'echo ran; exec sleep 30'] })))
      await daemon.client.stopDaemon()
      await waitFor('the daemon to exit', () => daemon.process.exitCode !== null || daemon.process.signalCode !== null)
      for (const task of started) {
        const record = JSON.parse(readFileSync(join(task.spool, 'task.json'), 'utf8')) as Task
        const output = existsSync(join(task.spool, 'output.log')) ? readFileSync(join(task.spool, 'output.log'), 'utf8') : ''
        if (output.includes('ran')) {
          expect(record.state, `${task.id} printed but is recorded ${record.state}: ${record.reason}`).toBe('killed')
          expect(record.startedAt).not.toBeNull()
        } else {
          expect(['failed', 'killed'], JSON.stringify(record)).toContain(record.state)
        }
      }
      const log = readFileSync(join(daemon.home, 'daemon.log'), 'utf8')
      expect(log).not.toContain('illegal task transition')
      expect(log).not.toMatch(/"level":50/)
      await daemon.stop()
    }
  })
})

describe('a daemon killed with SIGKILL', () => {
  test('during concurrent submissions, 10 rounds: every submission is recorded exactly once (no duplicate, none missing)', async () => {
    const home = createTempHome()
    removeHomeAfterwards(home)
    const env = daemonEnv(home)
    const client = new TendClient({ home, env, autoStart: true })
    cleanups.push(() => client.close())
    let answered = 0
    for (let round = 0; round < 10; round++) {
      await client.status()
      const pid = daemonPid(home)
      const submissions = Array.from({ length: 20 }, (_, index) => client.start({ command: ['true'], name: `round-${round}-${index}` }))
      // Crash as soon as the first answers arrive, while the rest are in flight.
      await Promise.race(submissions)
      process.kill(pid, 'SIGKILL')
      const results = await Promise.all(submissions)
      answered += results.length
      const names = records(home)
        .map((task) => task.name)
        .filter((name) => name?.startsWith(`round-${round}-`))
      expect(names.sort(), `round ${round}`).toEqual(results.map((task) => task.name).sort())
      expect(new Set(results.map((task) => task.id)).size).toBe(20)
    }
    expect(answered).toBe(200)
    await client.stopDaemon()
  })

  test('during heavy output, 10 rounds: output.log is a byte-exact prefix of what the task wrote, and one record per task', async () => {
    const home = createTempHome()
    removeHomeAfterwards(home)
    const total = 256 * 1024 * 1024
    const ids: string[] = []
    for (let round = 0; round < 10; round++) {
      const daemon = await startTestDaemon({ home })
      const task = await daemon.client.start({ command: [process.execPath, join(FIXTURES, 'write-bytes.mjs'), String(total)] })
      ids.push(task.id)
      await waitFor('output to flow', () => {
        try {
          return statSync(join(task.spool, 'output.log')).size > 4 * 1024 * 1024
        } catch {
          return false
        }
      })
      // Running on disk too: a crash before the running record lands is a crash during the start
      // (recorded failed, "while the task was starting"), which is not what this test is about.
      await waitFor(`task ${task.id} recorded running`, () => JSON.parse(readFileSync(join(task.spool, 'task.json'), 'utf8')).state === 'running')
      await daemon.crash()
      daemon.client.close()
    }
    const last = await startTestDaemon({ home })
    cleanups.push(() => last.stop())
    const tasks = await last.client.list({ all: true })
    expect(tasks.map((task) => task.id).sort()).toEqual([...ids].sort())
    const ended = await Promise.all(ids.map((id) => last.client.wait(id, { timeoutMs: 30_000 })))
    const outputs = ended.map((task) => readFileSync(join(task.spool, 'output.log')))
    const expected = expectedBytes(Math.max(...outputs.map((output) => output.length)))
    ended.forEach((task, index) => {
      expect(['lost', 'exited', 'killed']).toContain(task.state)
      const output = outputs[index]!
      expect(output.length).toBeGreaterThan(4 * 1024 * 1024)
      expect(output.equals(expected.subarray(0, output.length)), `${task.id}: output.log is not a prefix of the stream`).toBe(true)
    })
  }, 180_000)
})

describe('timeouts', () => {
  test('a timeout longer than 2^31-1 ms (24.8 days) does not fire at once', async () => {
    const daemon = await startTestDaemon()
    cleanups.push(() => daemon.stop())
    const task = await daemon.client.start({ command: ['sh', '-c', 'sleep 0.3; echo finished'], timeoutMs: 30 * 24 * 3600 * 1000 })
    const ended = await daemon.client.wait(task.id, { timeoutMs: 20_000 })
    expect(ended).toMatchObject({ state: 'exited', exitCode: 0 })
    expect((await daemon.client.read(task.id)).data).toBe('finished\n')
  })
})
