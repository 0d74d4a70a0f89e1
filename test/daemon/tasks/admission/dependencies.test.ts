import { describe, expect, test } from 'vitest'
import type { Task, TaskEvent } from '../../../../protocol/index.js'
import { dependencyVerdict, DependencyGate, type DependencyOutcome } from '../../../../daemon/tasks/admission/dependencies.js'
import { createQueuedTask, markEnded, markFailed, markStarted } from '../../../../daemon/tasks/transitions.js'
import { taskBase } from '../../../helpers/task-base.js'

const at = new Date('2026-01-01T00:00:00Z')
const queued = (id: string) => createQueuedTask(taskBase({ id }))
const exited = (id: string, exitCode: number) => markEnded(markStarted(queued(id), 1, at), { state: 'exited', exitCode }, 0, at)
const killed = (id: string) =>
  markEnded(markStarted(queued(id), 1, at), { state: 'killed', exitCode: null, signal: 'SIGTERM', reason: 'x', stoppedBy: 'operator' }, 0, at)

describe('dependencyVerdict', () => {
  const outcomes = (...entries: Array<[string, DependencyOutcome]>) => new Map(entries)
  test('waits while any is pending, starts once all exited 0', () => {
    const after = { ids: ['a', 'b'], any: false }
    expect(dependencyVerdict(after, outcomes(['a', exited('a', 0)]))).toEqual({ wait: true })
    expect(dependencyVerdict(after, outcomes(['a', exited('a', 0)], ['b', exited('b', 0)]))).toEqual({ start: true })
  })

  test('fails at the first that did not exit 0, saying how it ended, without waiting for the rest', () => {
    const after = { ids: ['a', 'b'], any: false }
    expect(dependencyVerdict(after, outcomes(['b', exited('b', 2)]))).toEqual({ fail: 'dependency b exited 2' })
    expect(dependencyVerdict(after, outcomes(['a', killed('a')]))).toEqual({ fail: 'dependency a was killed' })
    expect(dependencyVerdict(after, outcomes(['a', 'removed']))).toEqual({ fail: 'dependency a was removed' })
    expect(dependencyVerdict(after, outcomes(['a', markFailed(queued('a'), 'x', at)]))).toEqual({ fail: 'dependency a failed' })
  })

  test('with any, starts once all have ended, however', () => {
    const after = { ids: ['a', 'b'], any: true }
    expect(dependencyVerdict(after, outcomes(['a', exited('a', 2)]))).toEqual({ wait: true })
    expect(dependencyVerdict(after, outcomes(['a', exited('a', 2)], ['b', 'removed']))).toEqual({ start: true })
  })
})

describe('DependencyGate', () => {
  function gateOver(tasks: Map<string, Task>) {
    let listener: (event: TaskEvent) => void = () => {}
    const said: string[] = []
    const gate = new DependencyGate({
      find: (id) => tasks.get(id),
      subscribe: (each) => {
        listener = each
        return () => {}
      },
      release: (id) => said.push(`start ${id}`),
      fail: (id, reason) => said.push(`fail ${id}: ${reason}`),
      dropped: (id) => said.push(`dropped ${id}`),
    })
    const announce = (task: Task, type: TaskEvent['type'] = 'task.exited') => {
      tasks.set(task.id, task)
      listener({ seq: 1, daemonId: 'd', type, at: at.toISOString(), taskId: task.id, owner: task.owner, task })
    }
    return { gate, said, announce }
  }

  test('a task is released when its last dependency ends, judged from announcements alone', () => {
    const { gate, said, announce } = gateOver(
      new Map<string, Task>([
        ['a', queued('a')],
        ['b', exited('b', 0)],
      ]),
    )
    gate.wait({ ...queued('w'), after: { ids: ['a', 'b'], any: false } })
    expect(gate.holds('w')).toBe(true)
    announce(markStarted(queued('a'), 1, at), 'task.started')
    expect(said).toEqual([])
    announce(exited('a', 0))
    expect(said).toEqual(['start w'])
    expect(gate.holds('w')).toBe(false)
  })

  test('a dependency missing at the start, or removed before it ended, fails the task; a waiting task that ends is dropped', () => {
    const { gate, said, announce } = gateOver(new Map<string, Task>([['a', queued('a')]]))
    gate.wait({ ...queued('gone'), after: { ids: ['nowhere'], any: false } })
    gate.wait({ ...queued('w1'), after: { ids: ['a'], any: false } })
    gate.wait({ ...queued('w2'), after: { ids: ['a'], any: false } })
    announce(markFailed(queued('w2'), 'killed', at), 'task.failed')
    announce(queued('a'), 'task.removed')
    expect(said).toEqual(['fail gone: dependency nowhere was removed', 'dropped w2', 'fail w1: dependency a was removed'])
  })
})
