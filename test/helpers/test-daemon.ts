import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { TendClient } from '../../client/index.js'
import { socketAnswers } from '../../client/ensure-daemon.js'
import { isAlive, processesWithEnv } from './processes.js'
import { waitFor } from './wait-for.js'

export const REPO_ROOT = resolve(import.meta.dirname, '..', '..')
export const TEND_BIN = join(REPO_ROOT, 'bin', 'tend.js')
export const FIXTURES = join(REPO_ROOT, 'test', 'fixtures')

/** A fresh TEND_HOME in the temp folder. */
export function createTempHome(): string {
  return mkdtempSync(join(tmpdir(), 'tend-test-'))
}

export interface TestDaemon {
  home: string
  client: TendClient
  process: ChildProcess
  env: Record<string, string>
  /** Starts another client on the same home (for independent readers, races, ...). */
  newClient: () => TendClient
  /** Stops the daemon (SIGTERM), then asserts nothing of this home is left running, then deletes it. */
  stop: () => Promise<void>
  /** Kills the daemon with SIGKILL (a crash), leaving its tasks behind. */
  crash: () => Promise<void>
}

export interface TestDaemonOptions {
  /** Extra TEND_* settings for the daemon. */
  env?: Record<string, string>
  home?: string
}

/**
 * Environment for a daemon or CLI process on `home`, with fast test settings. Tasks run with
 * sandbox `off` unless a test asks for a profile: most tests exercise the daemon's own machinery
 * (and write to files outside their cwd); test/sandbox/ covers the profiles, and the CLI's
 * autostart test runs with the real default.
 */
export function daemonEnv(home: string, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !key.startsWith('TEND_')) env[key] = value
  return { ...env, TEND_HOME: home, TEND_KILL_GRACE: '1s', TEND_LOG_LEVEL: 'debug', TEND_SANDBOX: 'off', ...extra }
}

/** Starts `tend daemon` in the foreground on a temp home and waits for its socket. */
export async function startTestDaemon(options: TestDaemonOptions = {}): Promise<TestDaemon> {
  const home = options.home ?? createTempHome()
  const env = daemonEnv(home, options.env)
  const child = spawn(process.execPath, [TEND_BIN, 'daemon'], { env, stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const socket = join(home, 'tend.sock')
  await waitFor(`daemon socket ${socket} (daemon stderr: ${stderr})`, async () => {
    if (child.exitCode !== null) throw new Error(`daemon exited with ${child.exitCode}: ${stderr}`)
    return socketAnswers(socket)
  })
  const clients: TendClient[] = []
  const newClient = () => {
    const client = new TendClient({ home, autoStart: false })
    clients.push(client)
    return client
  }
  const client = newClient()
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()))
  const cleanup = async () => {
    for (const each of clients) each.close()
    await assertNothingLeft(home)
    rmSync(home, { recursive: true, force: true })
  }
  return {
    home,
    client,
    process: child,
    env,
    newClient,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM')
        await exited
      }
      await cleanup()
    },
    crash: async () => {
      child.kill('SIGKILL')
      await exited
    },
  }
}

/** Fails when any process that belongs to this home (daemon or task) is still running. */
export async function assertNothingLeft(home: string): Promise<void> {
  const leftovers = () => processesWithEnv(`TEND_HOME=${home}`).filter(isAlive)
  try {
    await waitFor(`no process of ${home} left running`, () => leftovers().length === 0, 5000)
  } catch (error) {
    const pids = leftovers()
    const described = pids.map((pid) => `${pid} (${commandLine(pid)})`)
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // already gone
      }
    }
    throw new Error(`${(error as Error).message}: leftover pids ${described.join(', ')}`)
  }
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ')
  } catch {
    return 'gone'
  }
}
