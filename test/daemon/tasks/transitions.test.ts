import { describe, expect, test } from 'vitest'
import { isTendError } from '../../../protocol/index.js'
import { taskBase } from '../../helpers/task-base.js'
import { createQueuedTask, markCancelled, markEnded, markFailed, markLost, markStarted } from '../../../daemon/tasks/transitions.js'

const base = taskBase()
const at = new Date('2026-11-30T00:00:01.000Z')

describe('task transitions', () => {
  test('a queued task starts, then ends with exactly the fields of its final state', () => {
    const running = markStarted(createQueuedTask(base), 42, at)
    expect(running).toMatchObject({ state: 'running', pid: 42, startedAt: at.toISOString(), endedAt: null, exitCode: null })
    const exited = markEnded(running, { state: 'exited', exitCode: 3 }, 10, at)
    expect(exited).toMatchObject({ state: 'exited', exitCode: 3, signal: null, reason: null, outputBytes: 10 })
    const killed = markEnded(
      running,
      { state: 'killed', exitCode: null, signal: 'SIGTERM', reason: 'killed by request (SIGTERM)', stoppedBy: 'operator' },
      0,
      at,
    )
    expect(killed).toMatchObject({ state: 'killed', signal: 'SIGTERM', reason: 'killed by request (SIGTERM)' })
  })

  test('queued tasks can fail or be cancelled; running ones can be lost', () => {
    expect(markFailed(createQueuedTask(base), 'no such program: x', at)).toMatchObject({ state: 'failed', reason: 'no such program: x', startedAt: null })
    expect(markCancelled(createQueuedTask(base), 'killed before it started', at, 'owner')).toMatchObject({ state: 'killed', startedAt: null, signal: null })
    expect(markLost(markStarted(createQueuedTask(base), 7, at), 'daemon died', 5, at)).toMatchObject({ state: 'lost', pid: 7, outputBytes: 5 })
  })

  test('every ending of a task still waiting for its readiness records that it ended first; a settled or absent readiness stays', () => {
    const waiting = createQueuedTask({ ...base, readyWhen: { port: 3000, timeoutMs: 1000 }, ready: null })
    const endedFirst = { failed: 'ended first', at: at.toISOString() }
    const running = markStarted(waiting, 1, at)
    expect(running.ready).toBeNull()
    expect(markEnded(running, { state: 'exited', exitCode: 0 }, 0, at).ready).toEqual(endedFirst)
    expect(markLost(running, 'daemon died', 0, at).ready).toEqual(endedFirst)
    expect(markFailed(waiting, 'no such program: x', at).ready).toEqual(endedFirst)
    expect(markCancelled(waiting, 'killed before it started', at, 'owner').ready).toEqual(endedFirst)
    const ready = { ...running, ready: { at: at.toISOString(), by: 'port' as const } }
    expect(markEnded(ready, { state: 'exited', exitCode: 0 }, 0, at).ready).toEqual(ready.ready)
    expect(markEnded(markStarted(createQueuedTask(base), 1, at), { state: 'exited', exitCode: 0 }, 0, at)).not.toHaveProperty('ready')
  })

  test('an illegal transition is a coded error that names both states', () => {
    const exited = markEnded(markStarted(createQueuedTask(base), 1, at), { state: 'exited', exitCode: 0 }, 0, at)
    let caught: unknown
    try {
      markStarted(exited, 2, at)
    } catch (error) {
      caught = error
    }
    expect(isTendError(caught, 'TEND_ERR_ILLEGAL_TRANSITION')).toBe(true)
    expect((caught as Error).message).toBe('illegal task transition: abcdefghijkl cannot go from exited to running')
    expect(() => markEnded(createQueuedTask(base), { state: 'exited', exitCode: 0 }, 0, at)).toThrow('cannot go from queued to exited')
    expect(() => markLost(createQueuedTask(base), 'x', 0, at)).toThrow('cannot go from queued to lost')
  })
})
