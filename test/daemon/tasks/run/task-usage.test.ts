import { describe, expect, test } from 'vitest'
import { sampledTask } from '../../../../daemon/tasks/run/task-usage.js'
import type { Tracked } from '../../../../daemon/tasks/run/task-run-context.js'

const base: Tracked = { pid: 4242, exited: new Promise(() => {}), resources: { cgroups: null, release: () => Promise.resolve() }, wrapped: false }

describe("what the live sampler reads of a run's task", () => {
  test('without a keeper: its leader alone, of unknown start', () => {
    expect(sampledTask('abcdefghijkl', base, 1000)).toEqual({ id: 'abcdefghijkl', startedAtMs: 1000, leaderPid: 4242, leaderStartTicks: 0 })
  })

  test("with a keeper: its leader's start time and the keeper's tree", () => {
    const keeper = { pid: 4241, startTicks: 77 }
    const tracked: Tracked = { ...base, leader: { pid: 4242, startTime: '78' }, keeper }
    expect(sampledTask('abcdefghijkl', tracked, 1000)).toEqual({ id: 'abcdefghijkl', startedAtMs: 1000, leaderPid: 4242, leaderStartTicks: 78, keeper })
  })

  test('nothing when its leader had ended as it was tracked', () => {
    expect(sampledTask('abcdefghijkl', { ...base, leader: null, keeper: { pid: 4241, startTicks: 77 } }, 1000)).toBeNull()
  })
})
