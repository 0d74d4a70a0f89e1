import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import type { Task } from '../../../../protocol/index.js'
import { failQueuedAtStop } from '../../../../daemon/tasks/admission/queued-at-stop.js'
import { EventLog } from '../../../../daemon/store/event-log.js'
import { TaskStore } from '../../../../daemon/store/task-store.js'
import { createQueuedTask, markStarted } from '../../../../daemon/tasks/transitions.js'
import { taskBase } from '../../../helpers/task-base.js'

let spool: string
let store: TaskStore

beforeEach(() => {
  spool = mkdtempSync(join(tmpdir(), 'tend-test-queued-at-stop-'))
  store = new TaskStore(spool, new EventLog('test-daemon'))
})

afterEach(async () => {
  await store.close()
  rmSync(spool, { recursive: true, force: true })
})

async function queued(id: string): Promise<void> {
  await store.create(createQueuedTask(taskBase({ id, spool: join(spool, id) })))
}

/** A run as the stop sees it: whether it is being launched, and whether its launch was dropped. */
function run(launching: Promise<void> | null = null) {
  const seen = { launching, dropped: false, dropLaunch: () => void (seen.dropped = true) }
  return seen
}

describe('the queued tasks at the daemon stop', () => {
  test('a queued task is recorded failed by daemon-stop with the reason, its launch dropped and its readers woken', async () => {
    await queued('aaaaaaaaaaa1')
    const runs = new Map([['aaaaaaaaaaa1', run()]])
    const woken: Task[] = []
    const writes = failQueuedAtStop(store, runs, { reason: 'daemon stopped', keeps: () => false, wakeReaders: (task) => woken.push(task) })
    expect(runs.get('aaaaaaaaaaa1')?.dropped).toBe(true)
    await Promise.all(writes)
    expect(store.get('aaaaaaaaaaa1')).toMatchObject({ state: 'failed', stoppedBy: 'daemon-stop', reason: 'daemon stopped before the task started' })
    expect(woken.map((task) => task.id)).toEqual(['aaaaaaaaaaa1'])
  })

  test('a task being launched, one kept for the next daemon and one already running are left as they are', async () => {
    await queued('aaaaaaaaaaa1')
    await queued('aaaaaaaaaaa2')
    await queued('aaaaaaaaaaa3')
    await store.transition('aaaaaaaaaaa3', (task) => markStarted(task, 4242, new Date()))
    const launching = run(new Promise<void>(() => {}))
    const runs = new Map([['aaaaaaaaaaa1', launching]])
    const writes = failQueuedAtStop(store, runs, { reason: 'daemon stopped', keeps: (id) => id === 'aaaaaaaaaaa2', wakeReaders: () => {} })
    expect(writes).toEqual([])
    expect(launching.dropped).toBe(false)
    expect(['aaaaaaaaaaa1', 'aaaaaaaaaaa2', 'aaaaaaaaaaa3'].map((id) => store.get(id).state)).toEqual(['queued', 'queued', 'running'])
  })
})
