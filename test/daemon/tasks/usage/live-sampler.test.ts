import { afterAll, describe, expect, test } from 'vitest'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { readProcStat } from '../../../../protocol/index.js'
import { LiveSampler, SAMPLES_PER_SECOND, type SampledTask } from '../../../../daemon/tasks/usage/live-sampler.js'
import { processFigures } from '../../../../daemon/tasks/usage/process-figures.js'
import { createQueuedTask, markStarted } from '../../../../daemon/tasks/transitions.js'
import { taskBase } from '../../../helpers/task-base.js'

/** The live sampler, on this test's own process (its figures are real) and a clock the test moves. */

const scratch = mkdtempSync(join(tmpdir(), 'tend-live-sampler-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))
let files = 0

/** A process list as a cgroup's cgroup.procs has it, one pid a line. */
function listing(pids: number[]): string {
  const path = join(scratch, `procs-${files++}`)
  writeFileSync(path, pids.map((pid) => `${pid}\n`).join(''))
  return path
}

function clock(startMs: number): { now: () => number; advance: (ms: number) => void } {
  let at = startMs
  return { now: () => at, advance: (ms) => (at += ms) }
}

const self: SampledTask = {
  id: 'abcdefghijkl',
  startedAtMs: 0,
  leaderPid: process.pid,
  leaderStartTicks: Number(readProcStat(process.pid)!.startTime),
  membersFile: listing([process.pid]),
}

function burn(ms: number): void {
  const end = performance.now() + ms
  while (performance.now() < end) {
    // busy
  }
}

describe('LiveSampler', () => {
  test('an ask within the interval answers the last sample; one after it samples again', () => {
    const time = clock(1_000_000)
    const sampler = new LiveSampler({ now: time.now, minIntervalMs: 1000 })
    const task = { ...self, startedAtMs: time.now() - 10_000 }
    const first = sampler.sample(task)
    time.advance(999)
    expect(sampler.sample(task)).toBe(first)
    time.advance(1)
    const second = sampler.sample(task)
    expect(second).not.toBe(first)
    expect(Date.parse(second.sampledAt) - Date.parse(first.sampledAt)).toBe(1000)
  })

  test('CPU % is the CPU time between two samples over the time between them; memory the resident set', () => {
    const time = clock(2_000_000)
    const sampler = new LiveSampler({ now: time.now })
    sampler.sample(self)
    const before = processFigures([process.pid], 0).cpuTicks
    burn(300)
    const ticks = processFigures([process.pid], 0).cpuTicks - before
    time.advance(1000)
    const live = sampler.sample(self)
    // The ticks counted here (10 ms each) over the 1000 ms the clock moved, give or take a tick or two of the sampling itself.
    expect(live.cpuPercent).toBeGreaterThanOrEqual(ticks - 2)
    expect(live.cpuPercent).toBeLessThanOrEqual(ticks + 2)
    expect(live.memoryBytes).toBeGreaterThan(10 * 1024 * 1024)
  })

  test('the held files follow the list: a process gone from it counts no more, and a pid never listed never counts', () => {
    const time = clock(5_000_000)
    const sampler = new LiveSampler({ now: time.now })
    const membersFile = listing([process.pid])
    const task = { ...self, membersFile }
    expect(sampler.sample(task).memoryBytes).toBeGreaterThan(0)
    writeFileSync(membersFile, '')
    time.advance(1000)
    expect(sampler.sample(task)).toMatchObject({ cpuPercent: 0, memoryBytes: 0 })
    sampler.forget(task.id)
  })

  test('a process older than the task is none of it, and a forgotten task starts over', () => {
    const time = clock(3_000_000)
    const sampler = new LiveSampler({ now: time.now })
    const later = { ...self, leaderStartTicks: self.leaderStartTicks + 1 }
    expect(sampler.sample(later)).toMatchObject({ cpuPercent: 0, memoryBytes: 0 })
    sampler.forget(later.id)
    expect(sampler.sample(self).memoryBytes).toBeGreaterThan(0)
  })

  test('with neither a keeper nor a cgroup, the leader alone counts', () => {
    const { membersFile: _membersFile, ...leaderOnly } = self
    const sampler = new LiveSampler({ now: clock(4_000_000).now })
    expect(sampler.sample(leaderOnly).memoryBytes).toBeGreaterThanOrEqual(processFigures([process.pid], 0).residentBytes / 2)
    sampler.forget(leaderOnly.id)
  })
})

describe('the sampling budget', () => {
  test('a thousand tasks asked for each second are sampled within SAMPLES_PER_SECOND a second, spread over the asks, each in turn', () => {
    const time = clock(1_000_000)
    // Spread as Math.random would, but the same each run.
    let spread = 0
    const sampler = new LiveSampler({ now: time.now, random: () => (spread = (spread + 0.618_034) % 1) })
    const tasks = Array.from({ length: 1000 }, (_, index) => ({ ...self, id: `task${String(index).padStart(8, '0')}`, membersFile: listing([process.pid]) }))
    const sampledAt = new Map<string, string>()
    const ask = () => {
      let fresh = 0
      for (const task of tasks) {
        const live = sampler.sample(task)
        if (sampledAt.get(task.id) !== live.sampledAt) fresh++
        sampledAt.set(task.id, live.sampledAt)
      }
      return fresh
    }
    // The first ask has every task's first figures.
    expect(ask()).toBe(1000)
    const counts: number[] = []
    const everSampledAgain = new Set<string>()
    for (let second = 1; second <= 12; second++) {
      time.advance(1000)
      const before = new Map(sampledAt)
      counts.push(ask())
      for (const [id, at] of sampledAt) if (before.get(id) !== at) everSampledAgain.add(id)
    }
    for (const count of counts) expect(count).toBeLessThanOrEqual(SAMPLES_PER_SECOND * 1.5)
    expect(counts.reduce((sum, count) => sum + count, 0) / counts.length).toBeLessThanOrEqual(SAMPLES_PER_SECOND)
    // Every task had new figures within the interval the budget allows (here 10 s): none is left behind.
    expect(everSampledAgain.size).toBe(1000)
    for (const task of tasks) sampler.forget(task.id)
  })

  test('a few tasks are each sampled once a second', () => {
    const time = clock(1_000_000)
    const sampler = new LiveSampler({ now: time.now })
    const first = sampler.sample(self)
    time.advance(999)
    expect(sampler.sample(self)).toBe(first)
    time.advance(1)
    expect(sampler.sample(self).sampledAt).not.toBe(first.sampledAt)
  })

  test("usageOf answers a running task's figures, fresh ones without reading anything, and nothing for a task that is not running", () => {
    const time = clock(3_000_000)
    const sampler = new LiveSampler({ now: time.now })
    const queued = createQueuedTask(taskBase({ id: self.id }))
    const running = markStarted(queued, process.pid, new Date(time.now() - 10_000))
    const asked: number[] = []
    const sampledOf = (startedAtMs: number) => {
      asked.push(startedAtMs)
      return { ...self, startedAtMs }
    }
    expect(sampler.usageOf(queued, sampledOf)).toBeUndefined()
    const first = sampler.usageOf(running, sampledOf)
    expect(first?.memoryBytes).toBeGreaterThan(0)
    expect(sampler.usageOf(running, sampledOf)).toBe(first)
    expect(asked).toEqual([time.now() - 10_000])
    sampler.forget(self.id)
    expect(sampler.usageOf(running, () => null)).toBeUndefined()
  })
})
