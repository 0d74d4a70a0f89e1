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

/** `credentials`: what AUTH takes (a password, or a user and a password). */
function answersPing(port: number, credentials: string | null): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    let answer = ''
    socket.once('error', () => resolve(false))
    socket.once('connect', () => socket.write(`${credentials === null ? '' : `AUTH ${credentials}\r\n`}PING\r\n`))
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
export async function startRedis(options: { persistIn?: string; password?: string; user?: string; configuration?: string[] } = {}): Promise<TestRedis> {
  const port = await freePort()
  const password = options.password ?? null
  const user = options.user ?? null
  let child: ChildProcess | null = null
  // With persistIn, every write is in an append-only file there: a restart loses nothing.
  const persistence = options.persistIn ? [`dir ${options.persistIn}`, 'appendonly yes', 'appendfsync always', 'save ""'] : ['save ""', 'appendonly no']
  // With a user, its ACL line is in `configuration`; without, the password is the default user's.
  const auth = password === null || user !== null ? [] : [`requirepass ${password}`]
  const configuration = [`port ${port}`, 'bind 127.0.0.1', ...persistence, ...auth, ...(options.configuration ?? [])].join('\n')
  const start = async () => {
    const started = spawn('redis-server', ['-'], { stdio: ['pipe', 'ignore', 'ignore'] })
    const failed = new Promise<never>((_, reject) =>
      started.once('error', (error) => reject(new Error(`redis-server could not start (is it installed? .ci/run installs it): ${error.message}`))),
    )
    started.stdin!.end(`${configuration}\n`)
    child = started
    await Promise.race([
      waitFor(`redis-server on port ${port}`, () => answersPing(port, password === null ? null : user === null ? password : `${user} ${password}`)),
      failed,
    ])
  }
  const stop = async () => {
    const running = child
    if (!running || running.exitCode !== null || running.signalCode !== null) return
    const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()))
    running.kill('SIGTERM')
    await exited
  }
  await start()
  const credentials = password === null ? '' : `${user === null ? '' : encodeURIComponent(user)}:${encodeURIComponent(password)}@`
  return { url: `redis://${credentials}127.0.0.1:${port}`, port, password, stop, restart: start }
}
