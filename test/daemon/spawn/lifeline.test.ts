import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { readExitFile } from '../../../daemon/spawn/exit-file.js'
import { NativeSpawner } from '../../../daemon/spawn/native-spawner.js'
import { NodeSpawner } from '../../../daemon/spawn/node-spawner.js'
import type { KeeperRef, SpawnExit, SpawnOutcome, SpawnRequest } from '../../../daemon/spawn/spawner.js'
import { isAlive, processesWithEnv } from '../../helpers/processes.js'
import { FIXTURES } from '../../helpers/test-daemon.js'
import { KEEPER_FIGURES } from '../../helpers/exit-record.js'
import { spawnRequest } from '../../helpers/spawn-request.js'
import { waitFor } from '../../helpers/wait-for.js'

/*
 * A task started to end with its daemon (endsWithDaemon): its keeper watches the helper, which dies
 * with the daemon, and kills the task's whole tree the moment the helper is gone, however it went.
 * These tests kill the helper itself with SIGKILL, as the kernel does when the daemon dies.
 */

/** How long a task's whole tree may take to go once its lifeline broke: milliseconds are expected. */
const LIFELINE_END_TIMEOUT_MS = 5000
/** How long the escaping tree may take to start all its processes. */
const TREE_START_TIMEOUT_MS = 10_000

const binary = NativeSpawner.binaryPath()
let scratch: string
const leftovers: number[] = []
const spawners: NativeSpawner[] = []

beforeAll(() => {
  if (!binary) throw new Error('dist/native/tend-spawner is missing: run `npm run build` (it needs a C compiler)')
  scratch = realpathSync(mkdtempSync(join(tmpdir(), 'tend-lifeline-')))
})

afterEach(async () => {
  for (const spawner of spawners.splice(0)) await spawner.close()
  for (const pid of leftovers.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // already gone
    }
    await waitFor(`leftover process ${pid} to be gone`, () => !isAlive(pid), 5000)
  }
})

afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true })
})

async function ownSpawner(): Promise<NativeSpawner> {
  const spawner = await NativeSpawner.start(binary!)
  spawners.push(spawner)
  return spawner
}

let dirCount = 0
function freshDir(): string {
  return mkdtempSync(join(scratch, `t${dirCount++}-`))
}

interface Started {
  pid: number
  keeper: KeeperRef
  exited: Promise<SpawnExit>
}

function started(outcome: SpawnOutcome): Started {
  if (!outcome.started || !outcome.keeper) throw new Error(`expected the task to start under a keeper, got ${JSON.stringify(outcome)}`)
  // Its exit may go unobserved, or reject once a test closes the spawner: never an unhandled rejection.
  outcome.exited.catch(() => {})
  leftovers.push(outcome.pid)
  return { pid: outcome.pid, keeper: outcome.keeper, exited: outcome.exited }
}

/**
 * test/fixtures/escaping-tree.sh in `dir`: a setsid grandchild, a double-forked orphan and a child
 * that ignores TERM. Answers the task and every pid of its tree, keeper included.
 */
async function startTree(spawner: NativeSpawner, dir: string, extra: Partial<SpawnRequest> = {}): Promise<{ task: Started; pids: number[] }> {
  const task = started(await spawner.spawn(spawnRequest(dir, { file: '/bin/sh', argv: ['sh', join(FIXTURES, 'escaping-tree.sh'), dir], ...extra })))
  const escapees = await waitFor(
    `the escaping tree in ${dir} to start`,
    () => {
      const names = ['setsid', 'orphan', 'ignore-term']
      if (!names.every((name) => existsSync(join(dir, `${name}.pid`)))) return undefined
      const pids = names.map((name) => Number(readFileSync(join(dir, `${name}.pid`), 'utf8')))
      return pids.every((pid) => pid > 0) ? pids : undefined
    },
    TREE_START_TIMEOUT_MS,
  )
  leftovers.push(...escapees)
  return { task, pids: [task.pid, task.keeper.pid, ...escapees] }
}

async function killHelper(spawner: NativeSpawner): Promise<void> {
  const helper = spawner.helperPid!
  process.kill(helper, 'SIGKILL')
  await waitFor(`the killed helper ${helper} to be gone`, () => !isAlive(helper), 5000)
}

function exitRecord(path: string): Record<string, unknown> | undefined {
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>) : undefined
}

const ENDED_WITH_HELPER: SpawnExit = { exitCode: null, signal: 'SIGKILL', lifelineBroke: true }

describe('native spawner: a task that ends with its daemon', () => {
  test('the helper killed -9 takes such a task along with all it started (setsid, double fork, TERM ignored), and its exit file says the lifeline broke; a task without it runs on', async () => {
    const spawner = await ownSpawner()
    const endingDir = freshDir()
    const keptDir = freshDir()
    const ending = await startTree(spawner, endingDir, { endsWithDaemon: true })
    const kept = await startTree(spawner, keptDir)
    await killHelper(spawner)

    await waitFor('the whole tree of the task that ends with its daemon to be gone', () => ending.pids.every((pid) => !isAlive(pid)), LIFELINE_END_TIMEOUT_MS)
    // Both keepers saw the helper go at the same moment: the other task is untouched.
    expect(kept.pids.filter(isAlive)).toEqual(kept.pids)
    expect(exitRecord(join(endingDir, 'exit.json'))).toEqual({
      v: 2,
      pid: ending.task.pid,
      exitCode: null,
      signal: 9,
      endedAtMs: expect.any(Number),
      endedBy: 'lifeline',
      outputLostBytes: 0,
      ...KEEPER_FIGURES,
    })
    expect(readExitFile(join(endingDir, 'exit.json'))).toMatchObject({ pid: ending.task.pid, ...ENDED_WITH_HELPER })
    // The new helper, attached to the keeper once the first one died, hears why it ended.
    expect(await ending.task.exited).toEqual(ENDED_WITH_HELPER)
    expect(existsSync(join(keptDir, 'exit.json'))).toBe(false)
  })

  test('a sandboxed task under real bubblewrap goes whole: bubblewrap, its pid namespace, and a setsid child in it', async () => {
    const spawner = await ownSpawner()
    const dir = freshDir()
    const marker = `TEND_LIFELINE_TEST=${process.pid}-${Date.now()}`
    const [key, value] = marker.split('=') as [string, string]
    const inside = 'setsid sleep 600 & sleep 600'
    const bwrap = [
      '/usr/bin/bwrap',
      '--die-with-parent',
      '--unshare-pid',
      '--new-session',
      '--ro-bind',
      '/',
      '/',
      '--proc',
      '/proc',
      '--dev',
      '/dev',
      '/bin/sh',
      '-c',
      inside,
    ]
    const task = started(await spawner.spawn(spawnRequest(dir, { file: bwrap[0]!, argv: bwrap, env: { [key]: value }, endsWithDaemon: true })))
    // bubblewrap, its init in the new pid namespace, sh, and the two sleeps.
    const sandbox = await waitFor(
      'the sandbox to be up',
      () => {
        const pids = processesWithEnv(marker).filter(isAlive)
        return pids.length >= 5 ? pids : undefined
      },
      TREE_START_TIMEOUT_MS,
    )
    leftovers.push(...sandbox)
    await killHelper(spawner)

    await waitFor('the whole sandbox to be gone with the helper', () => processesWithEnv(marker).filter(isAlive).length === 0, LIFELINE_END_TIMEOUT_MS)
    await waitFor('the keeper to be gone', () => !isAlive(task.keeper.pid), LIFELINE_END_TIMEOUT_MS)
    expect(exitRecord(join(dir, 'exit.json'))).toMatchObject({ pid: task.pid, endedBy: 'lifeline' })
  })

  test('a task on a terminal goes with the helper too, with all it started', async () => {
    const spawner = await ownSpawner()
    const dir = freshDir()
    const terminal = { resizeFifo: join(dir, 'resize.fifo'), cols: 80, rows: 24 }
    const ending = await startTree(spawner, dir, { stdinFifo: join(dir, 'input.fifo'), terminal, endsWithDaemon: true })
    await killHelper(spawner)

    await waitFor('the whole tree of the terminal task to be gone', () => ending.pids.every((pid) => !isAlive(pid)), LIFELINE_END_TIMEOUT_MS)
    expect(exitRecord(join(dir, 'exit.json'))).toMatchObject({ pid: ending.task.pid, exitCode: null, signal: 9, endedBy: 'lifeline' })
    expect(readFileSync(join(dir, 'output.log'), 'utf8')).toContain('tree started')
  })

  test('closing the spawner (the daemon leaving) ends such a task as well', async () => {
    const spawner = await ownSpawner()
    const dir = freshDir()
    const ending = await startTree(spawner, dir, { endsWithDaemon: true })
    await spawner.close()
    await waitFor('the whole tree to be gone once the helper exited', () => ending.pids.every((pid) => !isAlive(pid)), LIFELINE_END_TIMEOUT_MS)
    expect(exitRecord(join(dir, 'exit.json'))).toMatchObject({ pid: ending.task.pid, endedBy: 'lifeline' })
  })

  test('such a task that ends by itself is recorded as it ended, with no word of a lifeline', async () => {
    const spawner = await ownSpawner()
    const dir = freshDir()
    const task = started(await spawner.spawn(spawnRequest(dir, { file: '/bin/sh', argv: ['sh', '-c', 'sleep 0 & exit 3'], endsWithDaemon: true })))
    expect(await task.exited).toEqual({ exitCode: 3, signal: null })
    await waitFor('the keeper to be gone', () => !isAlive(task.keeper.pid), 5000)
    expect(exitRecord(join(dir, 'exit.json'))).toEqual({
      v: 2,
      pid: task.pid,
      exitCode: 3,
      signal: null,
      endedAtMs: expect.any(Number),
      endedBy: 'itself',
      outputLostBytes: 0,
      ...KEEPER_FIGURES,
    })
  })

  test('a lease that runs out ends such a task with all it started while the helper runs on; one renewed in time does not', async () => {
    const spawner = await ownSpawner()
    const endingDir = freshDir()
    const renewedDir = freshDir()
    const leaseFor = (dir: string, ms: number) => writeFileSync(join(dir, 'lease'), `${Number(process.hrtime.bigint() / 1_000_000n) + ms}\n`)
    leaseFor(endingDir, 400)
    leaseFor(renewedDir, 400)
    const ending = await startTree(spawner, endingDir, { endsWithDaemon: true })
    const renewed = await startTree(spawner, renewedDir, { endsWithDaemon: true })
    // Renewed well before each deadline, as a worker does while Redis confirms its lock.
    const renewing = setInterval(() => leaseFor(renewedDir, 400), 100)
    try {
      expect(await ending.task.exited).toEqual({ exitCode: null, signal: 'SIGKILL', leaseRanOut: true })
      await waitFor('the whole tree of the task whose lease ran out to be gone', () => ending.pids.every((pid) => !isAlive(pid)), LIFELINE_END_TIMEOUT_MS)
      expect(exitRecord(join(endingDir, 'exit.json'))).toEqual({
        v: 2,
        pid: ending.task.pid,
        exitCode: null,
        signal: 9,
        endedAtMs: expect.any(Number),
        endedBy: 'lease',
        outputLostBytes: 0,
        ...KEEPER_FIGURES,
      })
      expect(readExitFile(join(endingDir, 'exit.json'))).toMatchObject({ pid: ending.task.pid, leaseRanOut: true })
      // The helper is there all along: only the lease ended it.
      expect(isAlive(spawner.helperPid!)).toBe(true)
      expect(renewed.pids.filter(isAlive)).toEqual(renewed.pids)
    } finally {
      clearInterval(renewing)
    }
    // Not renewed any more: it goes too.
    await waitFor('the task whose renewals stopped to be gone', () => renewed.pids.every((pid) => !isAlive(pid)), LIFELINE_END_TIMEOUT_MS)
  })

  test('the node spawner refuses such a task at stage lifeline, saying why', async () => {
    const dir = freshDir()
    const outcome = await new NodeSpawner().spawn(spawnRequest(dir, { file: '/bin/true', endsWithDaemon: true }))
    expect(outcome).toMatchObject({ started: false, stage: 'lifeline', code: 'ENOTSUP', message: expect.stringContaining('end with its daemon') })
    expect(existsSync(join(dir, 'output.log'))).toBe(false)
  })
})

describe('readExitFile: the lifeline', () => {
  test('reads lifelineBroke: true; any other value of it is not an exit record', () => {
    const dir = freshDir()
    const write = (name: string, text: string) => {
      writeFileSync(join(dir, name), text)
      return join(dir, name)
    }
    expect(readExitFile(write('broke.json', '{"pid":12,"exitCode":null,"signal":9,"endedAtMs":1,"lifelineBroke":true}\n'))).toMatchObject({
      pid: 12,
      ...ENDED_WITH_HELPER,
    })
    expect(readExitFile(write('plain.json', '{"pid":12,"exitCode":null,"signal":9,"endedAtMs":1}\n'))).not.toHaveProperty('lifelineBroke')
    expect(readExitFile(write('false.json', '{"pid":12,"exitCode":null,"signal":9,"endedAtMs":1,"lifelineBroke":false}\n'))).toBeNull()
  })
})
