import { afterEach, describe, expect, test } from 'vitest'
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { readProcStat } from '../../../protocol/index.js'
import { keeperDescendants } from '../../../daemon/spawn/keeper-tree.js'
import { waitFor } from '../../helpers/wait-for.js'

/**
 * What a stop and a task's end reach besides its cgroup: every live descendant of its keeper (a
 * child subreaper; here the fixture that stands in for it), the keeper excluded, and only while the
 * keeper is the process recorded (its start time).
 */

const FIXTURE = join(import.meta.dirname, '../../fixtures/subreaper-keeper.py')
/** The leader starts a setsid'd orphan (its parent exits at once) with a child of its own, and prints the orphan's pid. */
const LEADER = ['sh', '-c', `setsid sh -c 'sh -c "sleep 600 & wait" >/dev/null & echo $!'; exec sleep 600`]

const started: ChildProcess[] = []
const pids: number[] = []

afterEach(async () => {
  // Whatever a failed test did not get to record is below its keeper too.
  for (const child of started) pids.push(...keeperDescendants({ pid: child.pid!, startTicks: Number(readProcStat(child.pid!)?.startTime ?? -1) }))
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
})

async function keeperWithOrphan(): Promise<{ keeper: { pid: number; startTicks: number }; leader: number; orphan: number; grandchild: number }> {
  const keeper = spawn('python3', [FIXTURE, ...LEADER], { stdio: ['pipe', 'pipe', 'inherit'] })
  started.push(keeper)
  const lines = createInterface({ input: keeper.stdout! })[Symbol.asyncIterator]()
  const leader = Number((await lines.next()).value)
  const orphan = Number((await lines.next()).value)
  pids.push(leader, orphan)
  const grandchild = await waitFor('the orphan handed to the keeper, with its child', () => {
    if (readProcStat(orphan)?.parent !== keeper.pid) return null
    const child = Number(readFileSync(`/proc/${orphan}/task/${orphan}/children`, 'utf8').trim())
    return child > 0 ? child : null
  })
  pids.push(grandchild)
  return { keeper: { pid: keeper.pid!, startTicks: Number(readProcStat(keeper.pid!)!.startTime) }, leader, orphan, grandchild }
}

describe("keeperDescendants: a task's processes below its keeper", () => {
  test('the leader, an orphan handed to the keeper and its child; not the keeper', async () => {
    const { keeper, leader, orphan, grandchild } = await keeperWithOrphan()
    expect(keeperDescendants(keeper).sort()).toEqual([leader, orphan, grandchild].sort())
  })

  test('nothing when the pid is not the keeper recorded (another start time), nor without a keeper', async () => {
    const { keeper } = await keeperWithOrphan()
    expect(keeperDescendants({ pid: keeper.pid, startTicks: keeper.startTicks + 1 })).toEqual([])
    expect(keeperDescendants(null)).toEqual([])
  })
})
