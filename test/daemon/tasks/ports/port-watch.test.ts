import { describe, expect, test } from 'vitest'
import { pino } from 'pino'
import { LIST_REFRESH_BATCH, PortWatch } from '../../../../daemon/tasks/ports/port-watch.js'
import type { Task } from '../../../../protocol/index.js'

/** A watch over `count` running tasks whose processes are looked up (and counted) but have no sockets. */
function watchOver(count: number) {
  const ids = Array.from({ length: count }, (_, index) => `task${String(index).padStart(8, '0')}`)
  const looked: string[] = []
  const running = { state: 'running', ports: [] } as unknown as Task
  const watch = new PortWatch({
    store: { current: () => running, findCurrent: () => running, transition: async () => running } as never,
    processesOf: (id) => {
      looked.push(id)
      return Promise.resolve([])
    },
    log: pino({ level: 'silent' }),
  })
  return { ids, looked, watch }
}

describe('the ports a list shows', () => {
  test('a list of many running tasks looks at a batch of their ports, the longest unlooked first, never all of them at once', async () => {
    const { ids, looked, watch } = watchOver(LIST_REFRESH_BATCH * 3)
    await watch.refreshSome(ids)
    expect(looked).toHaveLength(LIST_REFRESH_BATCH)
    await watch.refreshSome(ids)
    await watch.refreshSome(ids)
    // Three lists looked at each task once.
    expect(new Set(looked).size).toBe(ids.length)
    expect(looked).toHaveLength(ids.length)
  })

  test('a list of a few running tasks looks at each of them', async () => {
    const { ids, looked, watch } = watchOver(5)
    await watch.refreshSome(ids)
    expect([...looked].sort()).toEqual(ids)
  })
})
