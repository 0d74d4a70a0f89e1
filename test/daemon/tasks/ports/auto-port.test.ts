import { describe, expect, test } from 'vitest'
import { createServer } from 'node:net'
import { PortAllocator } from '../../../../daemon/tasks/ports/auto-port.js'
import { isTendError } from '../../../../protocol/index.js'

describe('port auto', () => {
  test('ports held by tasks not ended, and reservations being admitted, are never given; an ended task lets go of its own', () => {
    const held = new Set<number>([31_001])
    const allocator = new PortAllocator({ held: () => held, namespaceProcessOf: () => null, range: { first: 31_000, last: 31_003 } })
    const first = allocator.reserve('agent', false)
    const second = allocator.reserve('agent', false)
    expect([first.port, second.port]).toEqual([31_000, 31_002])
    // Their records are in the store now: they hold them from there.
    held.add(first.port).add(second.port)
    first.release()
    second.release()
    expect(allocator.reserve('agent', false).port).toBe(31_003)
    let full: unknown
    try {
      allocator.reserve('agent', false)
    } catch (error) {
      full = error
    }
    expect(isTendError(full, 'TEND_ERR_NO_FREE_PORT')).toBe(true)
    expect((full as Error).message).toBe('no free port for port auto in 31000-31003: every one is held by a task that has not ended, or listened on')
    // The task on 31000 ended: its port is free again.
    held.delete(31_000)
    expect(allocator.reserve('agent', false).port).toBe(31_000)
  })

  test('a port something listens on is never given', async () => {
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const taken = (server.address() as { port: number }).port
      const allocator = new PortAllocator({ held: () => [], namespaceProcessOf: () => null, range: { first: taken, last: taken + 1 } })
      expect(allocator.reserve('agent', false).port).toBe(taken + 1)
    } finally {
      server.close()
    }
  })
})
