import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, test } from 'vitest'
import { REPO_ROOT } from '../helpers/test-daemon.js'

/*
 * The console page's failure, pill and age wording, run in Node: shared/format.js is a plain ES
 * module touching no DOM (console-looks.test.ts sees the same in Chromium).
 */

type Loose = Record<string, unknown>
const format = (await import(pathToFileURL(join(REPO_ROOT, 'daemon/console/page/shared/format.js')).href)) as {
  isFailure: (task: Loose) => boolean
  stateLook: (task: Loose) => { label: string; className: string }
  formatAgo: (ms: number) => string
  formatRunTime: (ms: number) => string
  taskAge: (task: Loose, now: number) => { when: string; ran: string }
}

const at = (ms: number) => new Date(Date.parse('2026-01-01T00:00:00Z') + ms).toISOString()
const NOW = Date.parse('2026-01-01T00:00:00Z') + 3_600_000

describe("the console's failures and ages", () => {
  test('a non-zero exit, a kill, a timeout, a failed start and a lost task are failures; exit 0, running and queued are not', () => {
    const failures = [{ state: 'exited', exitCode: 3 }, { state: 'killed' }, { state: 'timed_out' }, { state: 'failed' }, { state: 'lost' }]
    const others = [{ state: 'exited', exitCode: 0 }, { state: 'running' }, { state: 'queued' }, { state: 'corrupt' }]
    expect(failures.map(format.isFailure)).toEqual([true, true, true, true, true])
    expect(others.map(format.isFailure)).toEqual([false, false, false, false])
  })

  test('a non-zero exit has a pill of its own, every failure is marked', () => {
    expect(format.stateLook({ state: 'exited', exitCode: 0 })).toEqual({ label: 'exited', className: 'badge state-exited' })
    expect(format.stateLook({ state: 'exited', exitCode: 3 })).toEqual({ label: 'exited 3', className: 'badge state-exited-nonzero failure' })
    expect(format.stateLook({ state: 'timed_out' })).toEqual({ label: 'timed_out', className: 'badge state-timed_out failure' })
    expect(format.stateLook({ state: 'running' })).toEqual({ label: 'running', className: 'badge state-running' })
  })

  test('ago and run time read at a glance', () => {
    expect([0, 4_999, 12_000, 59_999, 180_000, 7_200_000, 5 * 86_400_000].map(format.formatAgo)).toEqual([
      'just now',
      'just now',
      '12 s ago',
      '59 s ago',
      '3 min ago',
      '2 h ago',
      '5 d ago',
    ])
    expect([0, 1_234, 9_999, 42_000, 245_000].map(format.formatRunTime)).toEqual(['0.0 s', '1.2 s', '9.9 s', '42 s', '4m 05s'])
  })

  test('a finished task: when it ended and how long it ran; running and queued: for how long', () => {
    expect(format.taskAge({ state: 'exited', createdAt: at(0), startedAt: at(1_000), endedAt: at(2_200) }, NOW)).toEqual({
      when: 'ended 59 min ago',
      ran: 'ran 1.2 s',
    })
    expect(format.taskAge({ state: 'failed', createdAt: at(0), startedAt: null, endedAt: at(0) }, NOW)).toEqual({ when: 'ended 1 h ago', ran: '' })
    expect(format.taskAge({ state: 'running', createdAt: at(0), startedAt: at(3_480_000) }, NOW)).toEqual({ when: 'running 2 min', ran: '' })
    expect(format.taskAge({ state: 'queued', createdAt: at(3_560_000) }, NOW)).toEqual({ when: 'queued 40 s', ran: '' })
  })
})
