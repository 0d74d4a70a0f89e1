import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { rmSync } from 'node:fs'
import { createServer, type Server, type Socket } from 'node:net'
import { join } from 'node:path'
import { TendClient, TendError } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { createTempHome, daemonEnv } from '../helpers/test-daemon.js'

/** Settles with `promise`, or fails naming `what` when it has not settled after `ms` (the request would hang). */
async function settlesWithin<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const guard = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms}ms: the client hangs`)), ms)
  })
  try {
    return await Promise.race([promise, guard])
  } finally {
    clearTimeout(timer)
  }
}

/** What `promise` rejected with (fails when it resolved). */
async function rejection(promise: Promise<unknown>): Promise<TendError> {
  try {
    await promise
  } catch (error) {
    return error as TendError
  }
  throw new Error('expected the request to fail, but it answered')
}

describe('a daemon that accepts connections and never answers', () => {
  let home: string
  let server: Server
  const connections = new Set<Socket>()

  beforeAll(async () => {
    home = createTempHome()
    // A wedged daemon: the socket accepts, reads the request, and never says a word.
    server = createServer((socket) => {
      connections.add(socket)
      socket.on('close', () => connections.delete(socket))
      socket.on('error', () => {})
      socket.resume()
    })
    await new Promise<void>((resolve) => server.listen(join(home, 'tend.sock'), resolve))
  })
  afterAll(async () => {
    for (const socket of connections) socket.destroy()
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()))
    const leftovers = processesWithEnv(`TEND_HOME=${home}`).filter(isAlive)
    rmSync(home, { recursive: true, force: true })
    expect(leftovers, 'no process of the fake home left running (no daemon was auto-started)').toEqual([])
  })

  test('the client rejects with TEND_ERR_DAEMON_TIMEOUT once its request timeout has passed, naming the timeout and the socket', async () => {
    const client = new TendClient({ home, requestTimeoutMs: 300 })
    try {
      const error = await settlesWithin(rejection(client.status()), 15_000, 'client.status() against a silent daemon')
      expect(error).toBeInstanceOf(TendError)
      expect(error.code).toBe('TEND_ERR_DAEMON_TIMEOUT')
      expect(error.retryable).toBe(true)
      expect(error.message).toContain('the daemon did not answer within 300ms')
      expect(error.message).toContain(join(home, 'tend.sock'))
      expect(error.message).toContain('GET /v1/status')
    } finally {
      client.close()
    }
  })

  test("a long-poll's own wait is added to the budget: a read waiting 500ms gets 800ms", async () => {
    const client = new TendClient({ home, autoStart: false, requestTimeoutMs: 300 })
    try {
      const error = await settlesWithin(rejection(client.read('abcdefabcdef', { waitMs: 500 })), 15_000, 'client.read(waitMs) against a silent daemon')
      expect(error.code).toBe('TEND_ERR_DAEMON_TIMEOUT')
      expect(error.params.timeout).toBe('800ms')
    } finally {
      client.close()
    }
  })

  test('wait() gives up with TEND_ERR_DAEMON_TIMEOUT too, instead of hanging', async () => {
    const client = new TendClient({ home, autoStart: false, requestTimeoutMs: 200 })
    try {
      const error = await settlesWithin(rejection(client.wait('abcdefabcdef', { timeoutMs: 200 })), 15_000, 'client.wait() against a silent daemon')
      expect(error.code).toBe('TEND_ERR_DAEMON_TIMEOUT')
    } finally {
      client.close()
    }
  })

  test('TEND_REQUEST_TIMEOUT in the environment sets the timeout; the option wins over it', () => {
    expect(new TendClient({ home, env: { TEND_REQUEST_TIMEOUT: '2s' } }).options.requestTimeoutMs).toBe(2000)
    expect(new TendClient({ home, env: { TEND_REQUEST_TIMEOUT: '2s' }, requestTimeoutMs: 50 }).options.requestTimeoutMs).toBe(50)
    expect(new TendClient({ home, env: {} }).options.requestTimeoutMs).toBe(30_000)
  })

  test('an invalid timeout is refused, naming where it came from and the value', () => {
    const fromEnv = (() => {
      try {
        new TendClient({ home, env: { TEND_REQUEST_TIMEOUT: 'soon' } })
      } catch (error) {
        return error as TendError
      }
      throw new Error('expected TEND_REQUEST_TIMEOUT=soon to be refused')
    })()
    expect(fromEnv.code).toBe('TEND_ERR_CONFIG_INVALID')
    expect(fromEnv.message).toContain('TEND_REQUEST_TIMEOUT')
    expect(fromEnv.message).toContain('"soon"')
    expect(() => new TendClient({ home, requestTimeoutMs: 0 })).toThrow(/requestTimeoutMs.*0/)
  })

  test('`tend status` says the daemon did not answer and exits 3', async () => {
    const result = await runCli(['status'], daemonEnv(home, { TEND_REQUEST_TIMEOUT: '300ms' }), { timeoutMs: 20_000 })
    expect(result.stderr).toContain('tend: the daemon did not answer within 300ms')
    expect(result.exitCode).toBe(3)
  })

  test('`tend status --json` prints the error as JSON and exits 3', async () => {
    const result = await runCli(['status', '--json'], daemonEnv(home, { TEND_REQUEST_TIMEOUT: '300ms' }), { timeoutMs: 20_000 })
    expect(result.exitCode).toBe(3)
    expect(JSON.parse(result.stdout)).toMatchObject({ error: { code: 'TEND_ERR_DAEMON_TIMEOUT', statusCode: 504, retryable: true } })
  })

  test('an invalid TEND_REQUEST_TIMEOUT is a usage error of the CLI (exit 2) that names it', async () => {
    const result = await runCli(['status'], daemonEnv(home, { TEND_REQUEST_TIMEOUT: 'soon' }), { timeoutMs: 20_000 })
    expect(result.stderr).toContain('TEND_REQUEST_TIMEOUT')
    expect(result.exitCode).toBe(2)
  })
})
