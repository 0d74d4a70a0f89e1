import { afterEach, describe, expect, test } from 'vitest'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { createInterface } from 'node:readline'
import { join } from 'node:path'
import { readProcStat } from '../../../../protocol/index.js'
import { LiveSampler } from '../../../../daemon/tasks/usage/live-sampler.js'
import { processFigures } from '../../../../daemon/tasks/usage/process-figures.js'
import { waitFor } from '../../../helpers/wait-for.js'

/**
 * Without a cgroup a task's processes are its keeper's descendants: the keeper is a child subreaper,
 * so a process that leaves the task's session (setsid) and its parent (a double fork) is still its.
 */

const FIXTURE = join(import.meta.dirname, '../../../fixtures/subreaper-keeper.py')
const ORPHAN_BYTES = 48 * 1024 * 1024
/** The interpreter itself: a `python3` on PATH may be a wrapper (pyenv's shim) that runs it as its child, and $! would name the wrapper. */
const PYTHON = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).stdout.trim()
/**
 * The leader starts a python that holds ORPHAN_BYTES, in a session of its own, whose parent exits at
 * once; it prints its pid. The python makes the file `written` once every byte is written: its
 * resident set no longer grows after that (before, it may reach ORPHAN_BYTES with its own pages and
 * still be writing).
 */
const leaderCommand = (written: string) => [
  'sh',
  '-c',
  `setsid sh -c '${PYTHON} -c "import sys, time; b = bytes([1]) * ${ORPHAN_BYTES}; open(sys.argv[1], \\"w\\").close(); time.sleep(600)" "$0" >/dev/null & echo $!' "$0"; exec sleep 600`,
  written,
]

const started: ChildProcess[] = []
const pids: number[] = []
const folders: string[] = []

afterEach(async () => {
  for (const pid of pids.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // ended already
    }
  }
  for (const child of started.splice(0)) {
    child.stdin?.end()
    if (child.exitCode === null && child.signalCode === null) await once(child, 'exit')
  }
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
})

/** The keeper, its leader's pid and the orphan's pid, once the orphan is the keeper's child. */
async function keeperWithOrphan(): Promise<{ keeper: number; leader: number; orphan: number }> {
  const folder = mkdtempSync(join(tmpdir(), 'tend-keeper-tree-'))
  folders.push(folder)
  const written = join(folder, 'written')
  const keeper = spawn('python3', [FIXTURE, ...leaderCommand(written)], { stdio: ['pipe', 'pipe', 'inherit'] })
  started.push(keeper)
  const lines = createInterface({ input: keeper.stdout! })[Symbol.asyncIterator]()
  const leader = Number((await lines.next()).value)
  const orphan = Number((await lines.next()).value)
  pids.push(orphan, leader)
  await waitFor('the orphan handed to the keeper', () => readProcStat(orphan)?.parent === keeper.pid || null)
  await waitFor("the orphan's bytes all written", () => existsSync(written), 30_000)
  expect(processFigures([orphan], 0).residentBytes).toBeGreaterThanOrEqual(ORPHAN_BYTES)
  return { keeper: keeper.pid!, leader, orphan }
}

/** Its session (field 6 of its stat). */
function sessionOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3])
}

function startTicks(pid: number): number {
  return Number(readProcStat(pid)!.startTime)
}

describe("LiveSampler, a task without a cgroup: its keeper's descendants", () => {
  test('a process that setsid and double-forked is still counted, through the keeper it was handed to', async () => {
    const { keeper, leader, orphan } = await keeperWithOrphan()
    expect(sessionOf(orphan)).not.toBe(sessionOf(leader))
    const sampler = new LiveSampler()
    const live = sampler.sample({
      id: 'keepertree01',
      startedAtMs: Date.now() - 1000,
      leaderPid: leader,
      leaderStartTicks: startTicks(leader),
      keeper: { pid: keeper, startTicks: startTicks(keeper) },
    })
    sampler.forget('keepertree01')
    // The orphan's and the leader's resident sets; the keeper (python, some MiB) is not the task's.
    const expected = processFigures([orphan, leader], 0).residentBytes
    expect(live.memoryBytes).toBeGreaterThanOrEqual(ORPHAN_BYTES)
    expect(Math.abs(live.memoryBytes - expected)).toBeLessThan(4 * 1024 * 1024)
  })

  test('a keeper that is not the one the task had (another start time) counts nothing', async () => {
    const { keeper, leader } = await keeperWithOrphan()
    const sampler = new LiveSampler()
    const live = sampler.sample({
      id: 'keepertree02',
      startedAtMs: Date.now() - 1000,
      leaderPid: leader,
      leaderStartTicks: startTicks(leader),
      keeper: { pid: keeper, startTicks: startTicks(keeper) + 1 },
    })
    sampler.forget('keepertree02')
    expect(live).toMatchObject({ cpuPercent: 0, memoryBytes: 0 })
  })
})
