import { describe, expect, test } from 'vitest'
import { isTendError } from '../../../protocol/index.js'
import { resolveTaskRef } from '../../../daemon/store/task-refs.js'
import { createQueuedTask } from '../../../daemon/tasks/transitions.js'
import { taskBase } from '../../helpers/task-base.js'

const at = (minute: number) => new Date(Date.UTC(2026, 0, 1, 0, minute)).toISOString()
const build1 = createQueuedTask(taskBase({ id: 'abcd00000001', name: 'build', createdAt: at(1) }))
const build2 = createQueuedTask(taskBase({ id: 'abcd00000002', name: 'build', createdAt: at(2) }))
const named = createQueuedTask(taskBase({ id: 'ffff00000003', name: 'abcd0', createdAt: at(3) }))
const tasks = [build1, build2, named]
const now = Date.parse(at(10))

function refused(ref: string): { code: string; message: string } {
  try {
    resolveTaskRef(tasks, ref, now)
  } catch (error) {
    if (isTendError(error)) return { code: error.code, message: error.message }
    throw error
  }
  throw new Error(`${ref} resolved`)
}

describe('resolveTaskRef', () => {
  test('an exact id first, then the newest task of a name, then a unique id prefix', () => {
    expect(resolveTaskRef(tasks, 'abcd00000001', now)).toBe(build1.id)
    expect(resolveTaskRef(tasks, 'build', now)).toBe(build2.id)
    expect(resolveTaskRef(tasks, 'abcd00000002'.slice(0, 12), now)).toBe(build2.id)
    expect(resolveTaskRef(tasks, 'ffff', now)).toBe(named.id)
  })

  test('a name wins over an id prefix it also is', () => {
    expect(resolveTaskRef(tasks, 'abcd0', now)).toBe(named.id)
  })

  test('an ambiguous prefix lists every candidate, newest first, with its name, state and age', () => {
    const { code, message } = refused('abcd')
    expect(code).toBe('TEND_ERR_TASK_AMBIGUOUS')
    expect(message).toBe(
      'ambiguous task reference: abcd is the start of several task ids; give more of the id. ' +
        'Candidates: abcd00000002 ("build", queued, 8m ago), abcd00000001 ("build", queued, 9m ago)',
    )
  })

  test('a prefix shorter than 4 characters, or one nothing starts with, is not found, naming the reference', () => {
    expect(refused('abc')).toEqual({ code: 'TEND_ERR_TASK_NOT_FOUND', message: 'task not found: abc' })
    expect(refused('zzzz')).toEqual({ code: 'TEND_ERR_TASK_NOT_FOUND', message: 'task not found: zzzz' })
  })
})
