import { spawn, type ChildProcess } from 'node:child_process'
import { connect } from 'node:net'
import { freePort } from './ports.js'
import { waitFor } from './wait-for.js'

export interface TestRedis {
  url: string
  port: number
  /** Stops it (SIGTERM, no save) and waits for it to exit. */
  stop: () => Promise<void>
  /** Starts it again on the same port (after stop): an outage ends. */
  restart: () => Promise<void>
}

function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('error', () => resolve(false))
    socket.once('connect', () => socket.write('PING\r\n'))
    socket.once('data', (data) => {
      socket.destroy()
      resolve(data.toString().startsWith('+PONG'))
    })
  })
}

/**
 * A real redis-server (Debian's, which .ci/run installs) on a free loopback port, keeping nothing
 * on disk unless asked. A test that needs it fails, loudly, without it.
 */
export async function startRedis(options: { persistIn?: string } = {}): Promise<TestRedis> {
  const port = await freePort()
  let child: ChildProcess | null = null
  // With persistIn, every write is in an append-only file there: a restart loses nothing.
  const persistence = options.persistIn ? ['--dir', options.persistIn, '--appendonly', 'yes', '--appendfsync', 'always', '--save', ''] : ['--save', '', '--appendonly', 'no']
  const start = async () => {
    const started = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', ...persistence], { stdio: 'ignore' })
    const failed = new Promise<never>((_, reject) => started.once('error', (error) => reject(new Error(`redis-server could not start (is it installed? .ci/run installs it): ${error.message}`))))
    child = started
    await Promise.race([waitFor(`redis-server on port ${port}`, () => answersPing(port)), failed])
  }
  const stop = async () => {
    const running = child
    if (!running || running.exitCode !== null || running.signalCode !== null) return
    const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()))
    running.kill('SIGTERM')
    await exited
  }
  await start()
  return { url: `redis://127.0.0.1:${port}`, port, stop, restart: start }
}
