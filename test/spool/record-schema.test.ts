import { describe, expect, test } from 'vitest'
import { SCHEMA_VERSION, type Task, type TaskBase } from '../../protocol/index.js'
import { recordProblem, salvageRecordFields } from '../../spool/index.js'
import { createQueuedTask, markCancelled, markEnded, markFailed, markLost, markStarted } from '../../daemon/tasks/transitions.js'

const ID = 'recordcheck1'
const at = new Date(Date.UTC(2026, 0, 1))

const base: TaskBase = {
  id: ID,
  name: 'build',
  owner: 'agent-7',
  command: ['sh', '-c', 'make'],
  shell: true,
  cwd: '/work',
  envKeys: ['CI'],
  timeoutMs: 60_000,
  maxOutputBytes: 1024,
  outputBytes: 0,
  lifetime: 'owner',
  sandbox: 'workspace',
  network: 'loopback',
  writablePaths: ['/tmp/out'],
  sandboxWritable: ['/work', '/tmp/out'],
  memoryBytes: null,
  pidsMax: null,
  createdAt: at.toISOString(),
  spool: `/spool/${ID}`,
}

/** One task in each state, made by the daemon's own transitions. */
function everyState(): Task[] {
  const queued = createQueuedTask(base)
  const running = markStarted(queued, 4242, at)
  return [
    queued,
    running,
    markEnded(running, { state: 'exited', exitCode: 3 }, 17, at),
    markEnded(running, { state: 'killed', exitCode: null, signal: 'SIGTERM', reason: 'killed by the operator', stoppedBy: 'operator' }, 17, at),
    markCancelled(queued, 'killed before it started', at, 'owner'),
    markEnded(running, { state: 'timed_out', exitCode: 143, signal: null, reason: 'timed out after 1s', stoppedBy: 'timeout' }, 17, at),
    markFailed(queued, 'no such program: make', at),
    markLost(running, 'the daemon stopped while the task ran', 17, at),
  ]
}

const record = (task: Task, changes: Record<string, unknown> = {}) => ({ schemaVersion: SCHEMA_VERSION, ...task, ...changes })

describe('the record schema', () => {
  test('every record the daemon writes, in every state, is valid', () => {
    for (const task of everyState()) expect(recordProblem(record(task), ID), `a ${task.state} record`).toBeNull()
  })

  test('who a task ran as is kept once it started, checked, and optional (older records have none)', () => {
    const ranAs = { uid: 1879048300, gid: 1879048300, identity: 'task', keyring: 'own' } as const
    const running = markStarted(createQueuedTask(base), 4242, at, null, undefined, ranAs)
    expect(running.ranAs).toEqual(ranAs)
    const ended = markEnded(running, { state: 'exited', exitCode: 0 }, 3, at)
    expect(recordProblem(record(ended), ID)).toBeNull()
    expect(recordProblem(record(ended, { ranAs: { uid: 0, gid: 0, identity: 'daemon', fallback: 'why', keyring: 'daemon' } }), ID)).toBeNull()
    expect(recordProblem(record(everyState()[2]!), ID)).toBeNull()
    expect(recordProblem(record(ended, { ranAs: { ...ranAs, identity: 'root' } }), ID)).toBe(
      'task.json invalid: /ranAs/identity must be one of task, taskUser, daemon (got "root")',
    )
  })

  test('fields a later tend may add are let through', () => {
    expect(recordProblem(record(everyState()[2]!, { lifetime: 'persistent', stoppedBy: null }), ID)).toBeNull()
  })

  test('each state is held to its own fields', () => {
    const [queued, running] = everyState()
    expect(recordProblem(record(running!, { pid: null }), ID)).toBe('task.json invalid: /pid must be integer (got null)')
    expect(recordProblem(record(queued!, { startedAt: at.toISOString() }), ID)).toBe(
      'task.json invalid: /startedAt must be null (got "2026-01-01T00:00:00.000Z")',
    )
    const cancelled = everyState()[4]!
    expect(recordProblem(record(cancelled, { pid: 12 }), ID)).toBe('task.json invalid: /startedAt and /pid must both be set or both be null')
  })

  test('a reason names the first three violations with what each field must be and was, and counts the rest', () => {
    const exited = everyState()[2]!
    expect(recordProblem(record(exited, { command: ['make', 3], timeoutMs: -1, sandbox: 'none', endedAt: 'yesterday' }), ID)).toBe(
      'task.json invalid: /command/1 must be string (got 3); /timeoutMs must be at least 0 or null (got -1); /sandbox must be one of off, workspace, strict (got "none"); and 1 more',
    )
    expect(recordProblem(record(exited, { exitCode: 'a'.repeat(100) }), ID)).toBe(`task.json invalid: /exitCode must be integer (got "${'a'.repeat(56)}...)`)
  })

  test('what is not a record at all is said plainly', () => {
    expect(recordProblem(null, ID)).toBe('task.json invalid: expected an object, got null')
    expect(recordProblem([1], ID)).toBe('task.json invalid: expected an object, got an array')
    expect(recordProblem(record(everyState()[0]!, { schemaVersion: 7 }), ID)).toBe('task.json has schemaVersion 7; this tend reads schemaVersion 1')
    expect(recordProblem(record(everyState()[0]!, { id: 'another00001' }), ID)).toBe('task.json names another task: another00001')
    expect(recordProblem(record(everyState()[0]!, { id: '../../etc' }), ID)).toBe('task.json names another task: "../../etc"')
  })

  test('salvage keeps only the fields that are valid on their own', () => {
    expect(salvageRecordFields({ owner: 'agent-7', name: 5, command: ['make'], createdAt: 'soon', cwd: '/work', state: 'bogus' })).toEqual({
      owner: 'agent-7',
      command: ['make'],
      cwd: '/work',
    })
    expect(salvageRecordFields('text')).toEqual({})
  })
})
