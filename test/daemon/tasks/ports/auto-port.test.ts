import { describe, expect, test } from 'vitest'
import { createServer } from 'node:net'
import { PortAllocator, type PortAllocatorOptions } from '../../../../daemon/tasks/ports/auto-port.js'
import { isTendError, type Task, type TaskEvent } from '../../../../protocol/index.js'

type Listener = (event: Pick<TaskEvent, 'type' | 'task'>) => void

/** A store as the allocator sees it: its tasks, and the events of their next records. */
function fakeStore(tasks: Task[]) {
  const listeners: Listener[] = []
  let lists = 0
  return {
    tasks: {
      list: () => {
        lists++
        return tasks
      },
      subscribe: (listener: Listener) => {
        listeners.push(listener)
        return () => undefined
      },
    } satisfies PortAllocatorOptions['tasks'],
    record(task: Task) {
      for (const listener of listeners) listener({ type: task.state === 'queued' ? 'task.queued' : 'task.exited', task } as Pick<TaskEvent, 'type' | 'task'>)
    },
    get lists() {
      return lists
    },
  }
}

/** A task tend picked `port` for (`portAuto`): it holds it until it ends. */
function holder(id: string, port: number, fields: Partial<Task> = {}): Task {
  return { id, owner: 'agent', state: 'queued', port, portAuto: true, sandbox: 'off', network: 'host', ...fields } as Task
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => null,
    (error: unknown) => error,
  )
}

describe('port auto', () => {
  test('ports held by tasks not ended, and reservations being admitted, are never given; an ended task lets go of its own', async () => {
    const store = fakeStore([holder('t-held', 31_001)])
    const allocator = new PortAllocator({ tasks: store.tasks, namespaceProcessOf: () => null, perOwner: 64, range: { first: 31_000, last: 31_003 } })
    const first = await allocator.reserve('agent', false)
    const second = await allocator.reserve('agent', false)
    expect([first.port, second.port]).toEqual([31_000, 31_002])
    // Their records are in the store now: they hold them from there.
    store.record(holder('t-first', first.port))
    store.record(holder('t-second', second.port))
    first.release()
    second.release()
    expect((await allocator.reserve('agent', false)).port).toBe(31_003)
    const full = await failure(allocator.reserve('agent', false))
    expect(isTendError(full, 'TEND_ERR_NO_FREE_PORT')).toBe(true)
    expect((full as Error).message).toBe('no free port for port auto in 31000-31003: every one is held by a task that has not ended, or listened on')
    // The task on 31000 ended: its port is free again.
    store.record(holder('t-first', first.port, { state: 'exited' } as Partial<Task>))
    expect((await allocator.reserve('agent', false)).port).toBe(31_000)
    // The store was listed once, at the first pick; its events did the rest.
    expect(store.lists).toBe(1)
  })

  test('a port something listens on is never given', async () => {
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const taken = (server.address() as { port: number }).port
      const allocator = new PortAllocator({
        tasks: fakeStore([]).tasks,
        namespaceProcessOf: () => null,
        perOwner: 64,
        range: { first: taken, last: taken + 1 },
      })
      expect((await allocator.reserve('agent', false)).port).toBe(taken + 1)
    } finally {
      server.close()
    }
  })

  test("a task in its owner's private network is given a port free there: the host's listeners and other networks' holders do not count", async () => {
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const taken = (server.address() as { port: number }).port
      // Another owner's task on the host holds the other port of the range.
      const store = fakeStore([holder('t-host', taken + 1, { owner: 'other' })])
      const allocator = new PortAllocator({ tasks: store.tasks, namespaceProcessOf: () => null, perOwner: 64, range: { first: taken, last: taken + 1 } })
      expect(isTendError(await failure(allocator.reserve('agent', false)), 'TEND_ERR_NO_FREE_PORT')).toBe(true)
      const inside = await allocator.reserve('agent', true)
      expect(inside.port).toBe(taken)
      store.record(holder('t-inside', taken, { sandbox: 'workspace', network: 'loopback' } as Partial<Task>))
      inside.release()
      // Its own network's holder counts there; another owner's network is another.
      expect((await allocator.reserve('agent', true)).port).toBe(taken + 1)
      expect((await allocator.reserve('third', true)).port).toBe(taken)
    } finally {
      server.close()
    }
  })

  test('one owner holds at most perOwner ports: the next is refused naming the cap and its holders, and other owners are still given theirs', async () => {
    const store = fakeStore([holder('t-a', 32_000), holder('t-b', 32_001)])
    const allocator = new PortAllocator({ tasks: store.tasks, namespaceProcessOf: () => null, perOwner: 3, range: { first: 32_000, last: 32_099 } })
    const third = await allocator.reserve('agent', false)
    const refused = await failure(allocator.reserve('agent', false))
    expect(isTendError(refused, 'TEND_ERR_OWNER_PORTS_USED_UP')).toBe(true)
    expect((refused as Error).message).toBe(
      'no port auto for owner agent: its tasks not ended hold 3 ports of the range already (perOwnerAutoPorts): t-a (32000), t-b (32001) and 1 more; each is free again once its task ends',
    )
    expect((await allocator.reserve('other', false)).port).toBe(32_003)
    // The one being admitted failed: the owner may have one again.
    third.release()
    expect((await allocator.reserve('agent', false)).port).toBe(32_004)
  })
})
