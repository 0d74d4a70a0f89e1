import { describe, expect, test } from 'vitest'
import { createServer } from 'node:net'
import { listensOn } from '../../../../daemon/tasks/ready/port-probe.js'

describe('port probe', () => {
  test("the daemon's own namespace shows a server while it listens, and not after", async () => {
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as { port: number }
    expect(await listensOn('self', port)).toBe(true)
    await new Promise<void>((resolve) => server.close(() => resolve()))
    expect(await listensOn('self', port)).toBe(false)
    // No such process: nothing is seen.
    expect(await listensOn(-1, port)).toBe(false)
  })
})
