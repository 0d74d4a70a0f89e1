import { describe, expect, test } from 'vitest'
import type { Task } from '../../client/index.js'
import type { TaskUsage } from '../../protocol/usage.js'
import { costSummary, renderTaskList, type TaskListEntry } from '../../tools/core/index.js'
import { taskBase } from '../helpers/task-base.js'

const MiB = 1024 * 1024
const usage = (fields: Partial<TaskUsage> = {}): TaskUsage => ({
  cpuUserMs: 100_000,
  cpuSystemMs: 23_000,
  peakMemoryBytes: Math.round(1.2 * 1024 * MiB),
  readBytes: 0,
  writeBytes: 0,
  source: 'cgroup',
  ...fields,
})

function ended(fields: Partial<Task>): Task {
  return {
    ...taskBase({ name: 'build', outputBytes: 10 }),
    state: 'exited',
    startedAt: '2026-11-30T00:00:00.000Z',
    pid: 4242,
    endedAt: '2026-11-30T00:00:41.000Z',
    exitCode: 0,
    signal: null,
    reason: null,
    stoppedBy: null,
    ...fields,
  } as Task
}

describe('the one-line cost summary of an ended task', () => {
  test('how it ended, its wall time, its CPU time and its peak memory', () => {
    expect(costSummary(ended({ usage: usage() }))).toBe('exited 0 after 41 s · CPU 2 m 3 s · peak 1.2 GiB')
  })

  test('short and long figures keep their units readable', () => {
    const short = ended({ endedAt: '2026-11-30T00:00:01.500Z', usage: usage({ cpuUserMs: 300, cpuSystemMs: 20, peakMemoryBytes: 200 * MiB }) })
    expect(costSummary(short)).toBe('exited 0 after 1.5 s · CPU 320 ms · peak 200 MiB')
    const long = ended({ endedAt: '2026-11-30T02:05:00.000Z', usage: usage({ cpuUserMs: 3_600_000, cpuSystemMs: 0, peakMemoryBytes: 900 * 1024 }) })
    expect(costSummary(long)).toBe('exited 0 after 2 h 5 m · CPU 1 h · peak 900 KiB')
  })

  test('a stopped task says how; a peak measured by rusage says it is the largest process', () => {
    const killed = ended({ state: 'killed', exitCode: null, signal: 'SIGTERM', usage: usage({ source: 'rusage' }) })
    expect(costSummary(killed)).toBe('killed by SIGTERM after 41 s · CPU 2 m 3 s · peak 1.2 GiB (largest process)')
    expect(costSummary(ended({ state: 'timed_out', exitCode: null, signal: 'SIGTERM', usage: usage() }))).toMatch(/^timed out after 41 s · /)
  })

  test('a record without usage (a running task, a daemon before it) has none', () => {
    expect(costSummary(ended({}))).toBeNull()
    expect(costSummary({ ...ended({ usage: usage() }), state: 'running', endedAt: null } as Task)).toBeNull()
  })
})

describe("a running task's ports and readiness", () => {
  const entry = (fields: Partial<TaskListEntry>): TaskListEntry => ({
    id: 'abcdefabcdef',
    label: 'dev server',
    state: 'running',
    ageMs: 5000,
    exitCode: null,
    signal: null,
    stoppedBy: null,
    lifetime: 'owner',
    outputBytes: 120,
    ports: [],
    ready: undefined,
    ...fields,
  })

  test('task_list names where it listens and whether it is ready', () => {
    const listening = entry({
      ports: [
        { proto: 'tcp', address: '127.0.0.1', port: 8000 },
        { proto: 'udp', address: '0.0.0.0', port: 5353 },
      ],
      ready: { at: '2026-11-30T00:00:01.000Z', by: 'pattern', line: 'Serving HTTP on 127.0.0.1 port 8000' },
    })
    expect(renderTaskList([listening])).toMatch(/ dev server {2}\[listening: 127\.0\.0\.1:8000, udp 0\.0\.0\.0:5353\] \[ready\]$/)
    expect(renderTaskList([entry({ ready: null })])).toMatch(/ dev server {2}\[not ready yet\]$/)
    expect(renderTaskList([entry({ ready: { failed: 'timed out', at: '2026-11-30T00:01:00.000Z' } })])).toMatch(/ dev server {2}\[never ready: timed out\]$/)
    expect(renderTaskList([entry({})])).toMatch(/ dev server$/)
  })

  test('task_list columns stay aligned when a state, an exit or a size is long', () => {
    const text = renderTaskList([
      entry({ id: 'aaaaaaaaaaaa', state: 'exited', exitCode: 0 }),
      entry({ id: 'bbbbbbbbbbbb', state: 'timed_out', stoppedBy: 'timeout', signal: 'SIGTERM' }),
      entry({ id: 'cccccccccccc', state: 'killed', stoppedBy: 'session-end', signal: 'SIGKILL', outputBytes: 123_456_789 }),
    ])
    const lines = text.split('\n')
    for (const column of ['exit ', 'age ', 'output ', 'dev server'])
      expect(new Set(lines.map((line) => line.indexOf(column))).size, `${column} in\n${text}`).toBe(1)
  })
})
