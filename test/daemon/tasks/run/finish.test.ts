import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import { afterEach, describe, expect, test } from 'vitest'
import { endedRecord, keeperEndedReason, killRemains, settleOutput } from '../../../../daemon/tasks/run/finish.js'
import { DAEMON_ENDED_LIFELINE, LEASE_RAN_OUT, SPAWNER_ENDED_LIFELINE } from '../../../../daemon/tasks/run/ending.js'
import { createQueuedTask, markStarted } from '../../../../daemon/tasks/transitions.js'
import { taskMarker } from '../../../../daemon/spawn/run-name.js'
import { taskBase } from '../../../helpers/task-base.js'
import { isAlive, processesWithEnv } from '../../../helpers/processes.js'
import { waitFor } from '../../../helpers/wait-for.js'

const log = pino({ level: 'silent' })
const at = new Date('2026-12-01T00:00:01.000Z')
const folders: string[] = []
const children: number[] = []

afterEach(() => {
  for (const pid of children.splice(0)) if (isAlive(pid)) process.kill(pid, 'SIGKILL')
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
})

function outputFile(bytes: number): string {
  const folder = mkdtempSync(join(tmpdir(), 'tend-finish-'))
  folders.push(folder)
  const file = join(folder, 'output.log')
  writeFileSync(file, 'x'.repeat(bytes))
  return file
}

describe('how a task ends (finish.ts)', () => {
  test('output past its cap is cut back to it, and the final size is the cap', async () => {
    const file = outputFile(300)
    expect(await settleOutput({ taskId: 't', file, held: undefined, maxOutputBytes: 100 }, log)).toBe(100)
    expect(statSync(file).size).toBe(100)
  })

  test('output under its cap is left as it is, and its size is the final size', async () => {
    const file = outputFile(40)
    expect(await settleOutput({ taskId: 't', file, held: undefined, maxOutputBytes: 100 }, log)).toBe(40)
    expect(readFileSync(file, 'utf8')).toBe('x'.repeat(40))
  })

  test('a missing output reads as empty, and nothing is made in its place', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'tend-finish-'))
    folders.push(folder)
    expect(await settleOutput({ taskId: 't', file: join(folder, 'output.log'), held: undefined, maxOutputBytes: 100 }, log)).toBe(0)
    expect(() => statSync(join(folder, 'output.log'))).toThrow()
  })

  test('a started task is recorded as it ended, or lost with its reason, with the output its keeper could not write', () => {
    const running = markStarted(createQueuedTask(taskBase()), 42, at)
    expect(endedRecord(running, { ending: { state: 'exited', exitCode: 3 } }, 10, at)).toMatchObject({ state: 'exited', exitCode: 3, outputBytes: 10 })
    const lost = endedRecord(running, { lost: 'nobody knows' }, 5, at, 7)
    expect(lost).toMatchObject({ state: 'lost', reason: 'nobody knows', outputBytes: 5, outputLostBytes: 7 })
    expect(endedRecord(running, { lost: 'nobody knows' }, 5, at)).not.toHaveProperty('outputLostBytes')
  })

  test('a task its keeper ended is lost for its lease, else for its lifeline as whoever found it says', () => {
    expect(keeperEndedReason({ leaseRanOut: true })).toBe(LEASE_RAN_OUT)
    expect(keeperEndedReason({})).toBe(DAEMON_ENDED_LIFELINE)
    expect(keeperEndedReason({}, SPAWNER_ENDED_LIFELINE)).toBe(SPAWNER_ENDED_LIFELINE)
  })

  test('what is left of a task without a cgroup is found by its marker and killed', async () => {
    const task = { id: 'finishtest01', run: `finishtest01.${process.pid}${Date.now()}` }
    const [name, value] = taskMarker(task).split('=') as [string, string]
    const child = spawn('sleep', ['1000'], { env: { ...process.env, [name]: value }, stdio: 'ignore', detached: true })
    children.push(child.pid!)
    await waitFor('the leftover to carry its marker', () => processesWithEnv(taskMarker(task)).length === 1)
    const exited = new Promise((resolve) => child.once('exit', resolve))
    await killRemains(task, null)
    await exited
    expect(processesWithEnv(taskMarker(task))).toEqual([])
  })
})
