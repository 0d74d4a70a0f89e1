import { afterEach, expect, test } from 'vitest'
import { lstatSync, mkdtempSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import { createServer as createHttpServer, request, type Server } from 'node:http'
import { createServer as createNetServer, type Server as NetServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { SocketWatch, type HomeLock } from '../../daemon/http/socket-watch.js'
import { loadPeerAddon } from '../../daemon/peer/index.js'
import { waitFor } from '../helpers/wait-for.js'

// A process of the daemon's uid (an `off` task) can put its own socket at the daemon's path between
// the daemon's bind and any later look at the path. What the daemon takes for its own socket must
// come from the socket it bound (the kernel's sock_diag), never from the path.

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup()
})

function listening<T extends NetServer>(server: T, path: string): Promise<T> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(path, () => resolve(server))
  })
}

/** What answers at path: the daemon's HTTP server says "daemon", the impostor closes the connection unanswered. */
function whoAnswers(path: string): Promise<string> {
  return new Promise((resolve) => {
    const req = request({ socketPath: path, path: '/' }, (res) => {
      let body = ''
      res.on('data', (chunk: Buffer) => (body += chunk.toString()))
      res.on('end', () => resolve(body))
    })
    req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'))
    req.end()
  })
}

async function daemonLike(): Promise<{ folder: string; socket: string; server: Server; lock: HomeLock }> {
  const folder = mkdtempSync(join(tmpdir(), 'tend-test-socket-'))
  cleanups.push(() => rmSync(folder, { recursive: true, force: true }))
  const socket = join(folder, 'tend.sock')
  const server = createHttpServer((_req, res) => res.end('daemon'))
  cleanups.push(() => server.close())
  await listening(server, socket)
  const lockPath = join(folder, 'daemon.lock')
  writeFileSync(lockPath, '')
  const { dev, ino } = statSync(lockPath)
  const home = statSync(folder)
  // The lock file stays in place in these tests: it is never taken again.
  const retake = () => null
  return { folder, socket, server, lock: { path: lockPath, dev, ino, home: { path: folder, dev: home.dev, ino: home.ino }, retake } }
}

test('the kernel names the file a listener was bound to, whatever its path holds afterwards', async () => {
  const load = loadPeerAddon()
  expect(load.reason).toBeUndefined()
  const { socket, server } = await daemonLike()
  const bound = lstatSync(socket)
  const fd = (server as unknown as { _handle: { fd: number } })._handle.fd
  expect(load.addon!.boundPath(fd)).toEqual({ dev: bound.dev, ino: bound.ino >>> 0 })
  unlinkSync(socket)
  const impostor = await listening(
    createNetServer((connection) => connection.destroy()),
    socket,
  )
  cleanups.push(() => impostor.close())
  expect(lstatSync(socket).ino).not.toBe(bound.ino)
  expect(load.addon!.boundPath(fd)).toEqual({ dev: bound.dev, ino: bound.ino >>> 0 })
})

test('another socket put at the path before the daemon first looks is never taken for its own: it is moved aside and the path bound again', async () => {
  const { socket, server, lock } = await daemonLike()
  unlinkSync(socket)
  const impostor = await listening(
    createNetServer((connection) => connection.destroy()),
    socket,
  )
  cleanups.push(() => impostor.close())
  expect(await whoAnswers(socket)).not.toBe('daemon')
  const watch = new SocketWatch(socket, server, pino({ level: 'silent' }), lock)
  cleanups.push(() => watch.close())
  watch.check()
  await waitFor('the daemon to answer at its path again', async () => (await whoAnswers(socket)) === 'daemon', 10_000)
})
