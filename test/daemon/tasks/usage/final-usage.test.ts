import { describe, expect, test } from 'vitest'
import { cpus, totalmem } from 'node:os'
import { finalUsage } from '../../../../daemon/tasks/usage/final-usage.js'

/** What a task's keeper figures may be, bound by what the kernel allows for that run (a task under `off` can write its own exit file). */

const STARTED_AT = '2026-01-01T00:00:00.000Z'
const ONE_MINUTE_LATER = Date.parse(STARTED_AT) + 60_000
const PLAUSIBLE = { cpuUserMs: 1200, cpuSystemMs: 30, peakMemoryBytes: 200 * 1024 * 1024, readBytes: 4096, writeBytes: 10 * 1024 * 1024 }

function logged(): { warnings: Array<Record<string, unknown>>; log: { warn: (fields: Record<string, unknown>, message: string) => void } } {
  const warnings: Array<Record<string, unknown>> = []
  return { warnings, log: { warn: (fields, message) => warnings.push({ ...fields, message }) } }
}

describe('finalUsage', () => {
  test('plausible figures reach the record', () => {
    const { warnings, log } = logged()
    expect(finalUsage(PLAUSIBLE, null, { taskId: 't1', startedAt: STARTED_AT, endedAtMs: ONE_MINUTE_LATER, log })).toEqual({ ...PLAUSIBLE, source: 'rusage' })
    expect(warnings).toEqual([])
  })

  test.each([
    ['cpuUserMs', Number.MAX_SAFE_INTEGER],
    ['cpuSystemMs', Number.MAX_SAFE_INTEGER],
    ['peakMemoryBytes', Number.MAX_SAFE_INTEGER],
    ['readBytes', Number.MAX_SAFE_INTEGER],
    ['writeBytes', Number.MAX_SAFE_INTEGER],
  ])('a forged %s of %d is refused with a log line naming it, and no figure reaches the record', (figure, value) => {
    const { warnings, log } = logged()
    expect(finalUsage({ ...PLAUSIBLE, [figure]: value }, null, { taskId: 't1', startedAt: STARTED_AT, endedAtMs: ONE_MINUTE_LATER, log })).toBeUndefined()
    expect(warnings).toEqual([expect.objectContaining({ taskId: 't1', figure, value })])
  })

  test('CPU time past the wall time on every online CPU (and a second of slack) is refused; just under it is taken', () => {
    const { log } = logged()
    const limitMs = (60_000 + 1000) * cpus().length
    const run = { taskId: 't1', startedAt: STARTED_AT, endedAtMs: ONE_MINUTE_LATER, log }
    expect(finalUsage({ ...PLAUSIBLE, cpuUserMs: limitMs - 30, cpuSystemMs: 30 }, null, run)).toBeDefined()
    expect(finalUsage({ ...PLAUSIBLE, cpuUserMs: limitMs - 30, cpuSystemMs: 31 }, null, run)).toBeUndefined()
  })

  test('a peak past the physical memory is refused, even with a memory group to measure the peak', () => {
    const { warnings, log } = logged()
    const run = { taskId: 't1', startedAt: STARTED_AT, endedAtMs: ONE_MINUTE_LATER, log }
    expect(finalUsage({ ...PLAUSIBLE, peakMemoryBytes: totalmem() + 1 }, 1024, run)).toBeUndefined()
    expect(warnings).toHaveLength(1)
    expect(finalUsage({ ...PLAUSIBLE, peakMemoryBytes: totalmem() }, 1024, run)).toEqual({ ...PLAUSIBLE, peakMemoryBytes: 1024, source: 'cgroup' })
  })

  test('no keeper figures: nothing to record, nothing logged', () => {
    const { warnings, log } = logged()
    expect(finalUsage(undefined, 1024, { taskId: 't1', startedAt: STARTED_AT, endedAtMs: ONE_MINUTE_LATER, log })).toBeUndefined()
    expect(warnings).toEqual([])
  })
})
