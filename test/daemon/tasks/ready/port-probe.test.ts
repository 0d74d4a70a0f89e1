import { describe, expect, test } from 'vitest'
import { createServer } from 'node:net'
import { listensOn, tableListensOn } from '../../../../daemon/tasks/ready/port-probe.js'

const TABLE = [
  '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
  '   0: 0100007F:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0',
  '   1: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 1002 1 0000000000000000 100 0 0 10 0',
].join('\n')

describe('port probe', () => {
  test('a table shows a port listened on, not one only connected from', () => {
    expect(tableListensOn(TABLE, 3000)).toBe(true)
    // 0x1F90 = 8080: an established connection, not a listener.
    expect(tableListensOn(TABLE, 8080)).toBe(false)
    expect(tableListensOn(TABLE, 80)).toBe(false)
  })

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
