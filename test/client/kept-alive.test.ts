import { afterEach, expect, test } from 'vitest'
import { rmSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { Socket } from 'node:net'
import { join } from 'node:path'
import { TendClient } from '../../client/index.js'
import { createTempHome } from '../helpers/test-daemon.js'

/*
 * A kept-alive connection the daemon closes as the client reuses it (the daemon went idle on it,
 * or was replaced) must not fail the request: it never reached the daemon.
 */

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

const STATUS = { events: { daemonId: 'x', lastSeq: 0 } }

test('a request on a kept-alive connection the daemon drops is sent again on a fresh one', async () => {
  const home = createTempHome()
  const served = new Map<Socket, number>()
  let requests = 0
  // Answers the first request of each connection; drops a connection when a second one comes on it.
  const server: Server = createServer((request, response) => {
    requests += 1
    const count = (served.get(request.socket) ?? 0) + 1
    served.set(request.socket, count)
    if (count > 1) {
      request.socket.destroy()
      return
    }
    const body = JSON.stringify(STATUS)
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), connection: 'keep-alive' })
    response.end(body)
  })
  await new Promise<void>((resolve) => server.listen(join(home, 'tend.sock'), resolve))
  const client = new TendClient({ home, autoStart: false })
  cleanups.push(async () => {
    client.close()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
    rmSync(home, { recursive: true, force: true })
  })
  expect(await client.status()).toMatchObject(STATUS)
  // The same kept-alive connection is reused, dropped, and the request goes out again.
  expect(await client.status()).toMatchObject(STATUS)
  expect(requests).toBe(3)
  expect(served.size).toBe(2)
})
