import { createHash } from 'node:crypto'
import { createServer, type Server } from 'node:net'

/**
 * One daemon per TEND_HOME. The lock is an abstract Unix socket named after the home folder:
 * binding it is atomic, and the kernel releases it the moment its holder dies, so a crashed
 * daemon never leaves a stale lock behind (a pid file would).
 */
export async function acquireInstanceLock(home: string): Promise<{ release: () => void } | null> {
  const name = `\0tend-daemon-${createHash('sha256').update(home).digest('hex').slice(0, 32)}`
  const server: Server = createServer((socket) => socket.destroy())
  const acquired = await new Promise<boolean>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => (error.code === 'EADDRINUSE' ? resolve(false) : reject(error)))
    server.listen(name, () => resolve(true))
  })
  if (!acquired) return null
  server.unref()
  return { release: () => server.close() }
}
