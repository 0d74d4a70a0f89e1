import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { taskBase } from '../../helpers/task-base.js'
import { waitFor } from '../../helpers/wait-for.js'
import { EventLog } from '../../../daemon/store/event-log.js'
import { TaskStore } from '../../../daemon/store/task-store.js'
import { RecordWriter } from '../../../daemon/store/record-writer.js'
import { FS_DURABLE_WRITER, type DurableFile } from '../../../daemon/durable-write/durable-write.js'
import { recordPath } from '../../../spool/index.js'
import { createQueuedTask, markEnded, markStarted } from '../../../daemon/tasks/transitions.js'

let spool: string
let store: TaskStore

beforeEach(() => {
  spool = mkdtempSync(join(tmpdir(), 'tend-test-store-'))
  store = new TaskStore(spool, new EventLog('test-daemon'))
})

afterEach(async () => {
  await store.close()
  rmSync(spool, { recursive: true, force: true })
})

function queued(id: string, owner: string, createdAt: string) {
  return createQueuedTask(taskBase({ id, owner, createdAt, spool: join(spool, id) }))
}

const ids = (tasks: Array<{ id: string }>) => tasks.map((task) => task.id)

describe('the task store', () => {
  test('lists unfinished tasks by default and every task with all, each owner its own, in the order they were created', async () => {
    await store.create(queued('aaaaaaaaaaa1', 'alice', '2026-11-30T00:00:01.000Z'))
    await store.create(queued('aaaaaaaaaaa2', 'bob', '2026-11-30T00:00:02.000Z'))
    await store.create(queued('aaaaaaaaaaa3', 'alice', '2026-11-30T00:00:03.000Z'))
    const at = new Date('2026-11-30T00:00:04.000Z')
    await store.transition('aaaaaaaaaaa1', (task) => markStarted(task, 4242, at))
    await store.transition('aaaaaaaaaaa1', (task) => markEnded(task, { state: 'exited', exitCode: 0 }, 0, at))

    expect(ids(store.list())).toEqual(['aaaaaaaaaaa2', 'aaaaaaaaaaa3'])
    expect(ids(store.list({ all: true }))).toEqual(['aaaaaaaaaaa1', 'aaaaaaaaaaa2', 'aaaaaaaaaaa3'])
    expect(ids(store.list({ owner: 'alice' }))).toEqual(['aaaaaaaaaaa3'])
    expect(ids(store.list({ all: true, owner: 'alice' }))).toEqual(['aaaaaaaaaaa1', 'aaaaaaaaaaa3'])
    expect(store.list({ all: true, owner: 'carol' })).toEqual([])
    // The list holds each task's current version, not the one it was listed with first.
    expect(store.list({ all: true })[0]).toMatchObject({ state: 'exited', exitCode: 0 })
    expect(store.list({ all: true })[0]).toBe(store.get('aaaaaaaaaaa1'))

    store.forget('aaaaaaaaaaa3')
    expect(ids(store.list({ all: true }))).toEqual(['aaaaaaaaaaa1', 'aaaaaaaaaaa2'])
    expect(store.list({ owner: 'alice' })).toEqual([])
  })

  test('tasks loaded from the spool in any order are listed by creation time, then id', () => {
    store.adopt(queued('bbbbbbbbbbb3', 'alice', '2026-11-30T00:00:03.000Z'))
    store.adopt(queued('bbbbbbbbbbb2', 'alice', '2026-11-30T00:00:01.000Z'))
    store.adopt(queued('bbbbbbbbbbb1', 'bob', '2026-11-30T00:00:01.000Z'))
    expect(ids(store.list({ all: true }))).toEqual(['bbbbbbbbbbb1', 'bbbbbbbbbbb2', 'bbbbbbbbbbb3'])
    expect(ids(store.list())).toEqual(['bbbbbbbbbbb1', 'bbbbbbbbbbb2', 'bbbbbbbbbbb3'])
    expect(ids(store.list({ owner: 'alice' }))).toEqual(['bbbbbbbbbbb2', 'bbbbbbbbbbb3'])
    // A later task goes after them, and a version change keeps its place.
    store.adopt(queued('bbbbbbbbbbb0', 'bob', '2026-11-30T00:00:04.000Z'))
    store.patch('bbbbbbbbbbb2', { outputBytes: 7 })
    expect(ids(store.list({ all: true }))).toEqual(['bbbbbbbbbbb1', 'bbbbbbbbbbb2', 'bbbbbbbbbbb3', 'bbbbbbbbbbb0'])
    expect(store.list({ all: true })[1]).toMatchObject({ outputBytes: 7 })
  })

  test('answers a version only once it is on disk: a crash can never undo what a reader was told', async () => {
    // A disk that holds each record write until the test lets it go.
    const held: Array<() => void> = []
    const slowDisk = {
      ...FS_DURABLE_WRITER,
      write: (file: DurableFile) => new Promise<void>((resolve) => held.push(resolve)).then(() => FS_DURABLE_WRITER.write(file)),
    }
    const slow = new TaskStore(spool, new EventLog('test-daemon'), undefined, new RecordWriter(spool, slowDisk))
    const onDisk = (id: string) => JSON.parse(readFileSync(recordPath(spool, id), 'utf8')).state
    try {
      const created = slow.create(queued('ccccccccccc1', 'alice', '2026-11-30T00:00:01.000Z'))
      // The folder is made on the thread pool first: the record's write is held once that is done.
      await waitFor('the first record write to reach the disk', () => held.length > 0)
      held.shift()!()
      await created
      const started = slow.transition('ccccccccccc1', (task) => markStarted(task, 4242, new Date()))
      // In flight: every reader still sees the version on disk, and the next change starts from the newest one.
      expect(onDisk('ccccccccccc1')).toBe('queued')
      expect(slow.get('ccccccccccc1')).toMatchObject({ state: 'queued', pid: null })
      expect(slow.list().map((task) => task.state)).toEqual(['queued'])
      expect(slow.list({ owner: 'alice' }).map((task) => task.state)).toEqual(['queued'])
      expect((await slow.whenState('ccccccccccc1', (task) => task.state === 'running', 0)).state).toBe('queued')
      slow.patch('ccccccccccc1', { outputBytes: 5 })
      expect(slow.get('ccccccccccc1')).toMatchObject({ state: 'queued', outputBytes: 5 })
      const ended = slow.transition('ccccccccccc1', (task) =>
        task.state === 'running' ? markEnded(task, { state: 'exited', exitCode: 0 }, 9, new Date()) : null,
      )
      held.shift()!()
      expect(await started).toMatchObject({ state: 'running', pid: 4242 })
      expect(onDisk('ccccccccccc1')).toBe('running')
      expect(slow.get('ccccccccccc1')).toMatchObject({ state: 'running', pid: 4242, outputBytes: 5 })
      expect(slow.list().map((task) => task.state)).toEqual(['running'])
      held.shift()!()
      expect(await ended).toMatchObject({ state: 'exited', outputBytes: 9 })
      expect(slow.get('ccccccccccc1')).toMatchObject({ state: 'exited', outputBytes: 9 })
      expect(slow.list()).toEqual([])
      expect(slow.list({ all: true })[0]).toBe(slow.get('ccccccccccc1'))
    } finally {
      for (const release of held) release()
      await slow.close()
    }
  })
})
