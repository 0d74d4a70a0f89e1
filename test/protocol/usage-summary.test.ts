import { describe, expect, test } from 'vitest'
import { formatSpan, formatTaskSummary, formatBinaryBytes, type Task } from '../../protocol/index.js'

/** The one line the agent tools (and the CLI) say about a task: how it stands or ended, for how long, and what it used. */

const GiB = 1024 ** 3
const STARTED = '2026-01-01T00:00:00.000Z'
const usage = (cpuMs: number, peakMemoryBytes: number): NonNullable<Task['usage']> => ({
  cpuUserMs: cpuMs - 3000,
  cpuSystemMs: 3000,
  peakMemoryBytes,
  readBytes: 0,
  writeBytes: 0,
  source: 'rusage',
})
const ended = (fields: Partial<Task>): Parameters<typeof formatTaskSummary>[0] => ({
  state: 'exited',
  exitCode: 0,
  signal: null,
  startedAt: STARTED,
  endedAt: '2026-01-01T00:00:41.000Z',
  ...fields,
})

describe('formatTaskSummary', () => {
  test("an exit, with its wall time, CPU time and peak memory, as the issue's example reads", () => {
    expect(formatTaskSummary(ended({ usage: usage(123_000, 1.2 * GiB) }))).toBe('exited 0 after 41 s · CPU 2 m 3 s · peak 1.2 GiB')
  })

  test('each way a task ends says itself; without figures only the state and the time', () => {
    expect(formatTaskSummary(ended({ state: 'killed', exitCode: null, signal: 'SIGTERM' }))).toBe('killed by SIGTERM after 41 s')
    expect(formatTaskSummary(ended({ state: 'timed_out', exitCode: null, signal: 'SIGKILL' }))).toBe('timed out after 41 s')
    expect(formatTaskSummary(ended({ state: 'lost', exitCode: null }))).toBe('lost after 41 s')
    expect(formatTaskSummary(ended({ state: 'failed', exitCode: null, startedAt: null }))).toBe('failed')
    expect(formatTaskSummary(ended({ exitCode: 2, usage: usage(3_400, 200 * 1024 ** 2) }))).toBe('exited 2 after 41 s · CPU 3.4 s · peak 200 MiB')
  })

  test('a running task says how long it has run and, with live figures, what it uses now', () => {
    const now = Date.parse('2026-01-01T00:02:05.000Z')
    const running = ended({ state: 'running', exitCode: null, endedAt: null })
    expect(formatTaskSummary(running, now)).toBe('running for 2 m 5 s')
    expect(formatTaskSummary({ ...running, live: { cpuPercent: 97.5, memoryBytes: 300 * 1024 ** 2, sampledAt: STARTED } }, now)).toBe(
      'running for 2 m 5 s · CPU 97.5% · memory 300 MiB',
    )
  })
})

describe('formatSpan and formatBinaryBytes', () => {
  test('spans in words a model reads: ms, s, m and s, h and m', () => {
    expect([0, 350, 1_000, 3_400, 41_000, 60_000, 123_000, 3_600_000, 3_900_000].map(formatSpan)).toEqual([
      '0 ms',
      '350 ms',
      '1 s',
      '3.4 s',
      '41 s',
      '1 m',
      '2 m 3 s',
      '1 h',
      '1 h 5 m',
    ])
  })

  test('sizes in binary units with one decimal below 100', () => {
    expect([0, 1023, 1024, 1536, 200 * 1024 ** 2, 1.2 * GiB, 2048 * GiB].map(formatBinaryBytes)).toEqual([
      '0 B',
      '1023 B',
      '1.0 KiB',
      '1.5 KiB',
      '200 MiB',
      '1.2 GiB',
      '2.0 TiB',
    ])
  })
})
