import { spawn, type ChildProcess } from 'node:child_process'
import { connect } from 'node:net'
import { freePort } from './ports.js'
import { waitFor } from './wait-for.js'

export interface TestRedis {
  /** redis://[:password@]127.0.0.1:port */
  url: string
  port: number
  /** The password Redis requires (requirepass), when started with one. */
  password: string | null
  /** Stops it (SIGTERM, no save) and waits for it to exit. */
  stop: () => Promise<void>
  /** Starts it again on the same port (after stop): an outage ends. */
  restart: () => Promise<void>
}

function answersPing(port: number, password: string | null): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    let answer = ''
    socket.once('error', () => resolve(false))
    socket.once('connect', () => socket.write(`${password === null ? '' : `AUTH ${password}\r\n`}PING\r\n`))
    socket.on('data', (data) => {
      answer += data.toString()
      if (!answer.includes('+PONG') && !answer.includes('-')) return
      socket.destroy()
      resolve(answer.includes('+PONG'))
    })
  })
}

/**
 * A real redis-server (Debian's, which .ci/run installs) on a free loopback port, keeping nothing
 * on disk unless asked, with a password when asked (given in its configuration on stdin, so that it
 * is in no process's argv). A test that needs it fails, loudly, without it.
 */
export async function startRedis(options: { persistIn?: string; password?: string } = {}): Promise<TestRedis> {
  const port = await freePort()
  const password = options.password ?? null
  let child: ChildProcess | null = null
  // With persistIn, every write is in an append-only file there: a restart loses nothing.
  const persistence = options.persistIn ? [`dir ${options.persistIn}`, 'appendonly yes', 'appendfsync always', 'save ""'] : ['save ""', 'appendonly no']
  const configuration = [`port ${port}`, 'bind 127.0.0.1', ...persistence, ...(password === null ? [] : [`requirepass ${password}`])].join('\n')
  const start = async () => {
    const started = spawn('redis-server', ['-'], { stdio: ['pipe', 'ignore', 'ignore'] })
    const failed = new Promise<never>((_, reject) => started.once('error', (error) => reject(new Error(`redis-server could not start (is it installed? .ci/run installs it): ${error.message}`))))
    started.stdin!.end(`${configuration}\n`)
    child = started
    await Promise.race([waitFor(`redis-server on port ${port}`, () => answersPing(port, password)), failed])
  }
  const stop = async () => {
    const running = child
    if (!running || running.exitCode !== null || running.signalCode !== null) return
    const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()))
    running.kill('SIGTERM')
    await exited
  }
  await start()
  const auth = password === null ? '' : `:${encodeURIComponent(password)}@`
  return { url: `redis://${auth}127.0.0.1:${port}`, port, password, stop, restart: start }
}
