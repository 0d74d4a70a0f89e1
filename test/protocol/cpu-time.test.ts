import { describe, expect, test } from 'vitest'
import { cpuTimeMs, formatTaskSummary } from '../../protocol/index.js'
import { cpuCell, usageText } from '../../client/cli/usage-text.js'
import type { Task } from '../../protocol/index.js'

/** A task's CPU time, user and system together, as the CLI and the summaries add them up: never past the safe-integer range. */

const ABSURD = {
  cpuUserMs: Number.MAX_SAFE_INTEGER,
  cpuSystemMs: Number.MAX_SAFE_INTEGER,
  peakMemoryBytes: 1,
  readBytes: 0,
  writeBytes: 0,
  source: 'rusage' as const,
}

describe('cpuTimeMs', () => {
  test('adds user and system time', () => {
    expect(cpuTimeMs({ cpuUserMs: 1200, cpuSystemMs: 30 })).toBe(1230)
  })

  test('a sum past the safe-integer range (a record written before figures were bounded) stays a safe integer', () => {
    expect(Number.isSafeInteger(cpuTimeMs(ABSURD))).toBe(true)
  })

  test("tend ps's CPU cell, tend show's used line and the summary add up through it", () => {
    const task = { state: 'exited', exitCode: 0, signal: null, startedAt: null, endedAt: null, usage: ABSURD } as unknown as Task
    const total = cpuTimeMs(ABSURD)
    expect(cpuCell(task)).not.toMatch(/NaN|Infinity|e\+/)
    expect(usageText(task)).not.toMatch(/NaN|Infinity|e\+/)
    expect(formatTaskSummary(task)).toContain(`CPU`)
    expect(total).toBe(Number.MAX_SAFE_INTEGER)
  })
})
