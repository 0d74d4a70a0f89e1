import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { existsSync, linkSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { request } from 'node:http'
import { userInfo } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { currentRegistryUser, homeRegistryDir, knownHomes } from '../../daemon/store/home-registry.js'
import { runCli } from '../helpers/cli.js'
import { assertNothingLeft, createTempHome, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

interface Answer {
  status: number
  body: string
}

/** One POST /v1/tasks over a unix socket; the script runs as is inside the sandboxes below (argv: socket, body). */
const POST_SCRIPT = `
const [socketPath, body] = process.argv.slice(-2)
const req = require('node:http').request({ socketPath, method: 'POST', path: '/v1/tasks', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
  let text = ''
  res.on('data', (chunk) => (text += chunk))
  res.on('end', () => console.log(JSON.stringify({ status: res.statusCode, body: text })))
})
req.on('error', (error) => console.log(JSON.stringify({ status: 0, body: error.code || error.message })))
req.end(body)
`

/** The same request from this (unsandboxed) process. */
function postFromHere(socketPath: string, body: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath,
        method: 'POST',
        path: '/v1/tasks',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = ''
        res.on('data', (chunk: Buffer) => (text += chunk.toString()))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }))
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

/** The registry's entries, as files: which homes are announced. */
function registeredHomes(): string[] {
  const dir = homeRegistryDir(currentRegistryUser())
  if (!existsSync(dir)) return []
  return readdirSync(dir)
    .filter((name) => name.endsWith('.json'))
    .map((name) => (JSON.parse(readFileSync(join(dir, name), 'utf8')) as { home: string }).home)
}

let stateDir: string
let daemonA: TestDaemon
let daemonB: TestDaemon
let socketB: string
/** Where the tasks that must never run would write. */
let canary: string
let scratch: string

beforeAll(async () => {
  // A state folder of their own: the default home is there (the registry does not move with it).
  stateDir = mkdtempSync('/var/tmp/tend-peer-state-')
  daemonA = await startTestDaemon({ env: { XDG_STATE_HOME: stateDir } })
  // Under /var/tmp, B's home stays visible inside bubblewrap (a sandbox gets its own /tmp).
  daemonB = await startTestDaemon({ home: mkdtempSync('/var/tmp/tend-peer-b-'), env: { XDG_STATE_HOME: stateDir } })
  socketB = join(daemonB.home, 'tend.sock')
  scratch = mkdtempSync('/var/tmp/tend-peer-scratch-')
  canary = join(scratch, 'unsandboxed-task-ran')
})

afterAll(async () => {
  await daemonA?.stop()
  await daemonB?.stop()
  if (scratch) rmSync(scratch, { recursive: true, force: true })
  if (stateDir) rmSync(stateDir, { recursive: true, force: true })
})

const evilBody = () => JSON.stringify({ command: ['sh', '-c', `echo ran > ${canary}`], cwd: scratch, sandbox: 'off' })

describe('requests from inside a sandbox', () => {
  test('a process in a bubblewrap sandbox is refused by another daemon with 403 TEND_ERR_SANDBOXED_CALLER, and no task is created', async () => {
    const before = await daemonB.client.list({ all: true })
    const sandboxed = await execa(
      'bwrap',
      [
        '--unshare-user',
        '--unshare-pid',
        '--die-with-parent',
        '--ro-bind',
        '/',
        '/',
        '--dev',
        '/dev',
        '--proc',
        '/proc',
        '--',
        process.execPath,
        '-e',
        POST_SCRIPT,
        socketB,
        evilBody(),
      ],
      { reject: false, timeout: 30_000 },
    )
    expect(sandboxed.exitCode, `bwrap failed: ${sandboxed.stderr}`).toBe(0)
    const answer = JSON.parse(sandboxed.stdout) as Answer
    expect(answer.status, answer.body).toBe(403)
    const wire = JSON.parse(answer.body) as Record<string, unknown>
    expect(wire).toMatchObject({ statusCode: 403, code: 'TEND_ERR_SANDBOXED_CALLER', error: 'Forbidden', blame: 'caller', retryable: false })
    expect(wire.message).toMatch(
      /^request refused: the caller runs inside a sandbox \(pid [1-9]\d* in another user\/pid\/mount namespace\); tasks cannot drive tend$/,
    )
    expect(await daemonB.client.list({ all: true })).toEqual(before)
    expect(existsSync(canary)).toBe(false)
  })

  test('the same request from an unsandboxed process is served (control)', async () => {
    const answer = await postFromHere(socketB, JSON.stringify({ command: ['true'], cwd: scratch, sandbox: 'off' }))
    expect(answer.status, answer.body).toBe(201)
    const task = JSON.parse(answer.body) as { id: string }
    expect((await daemonB.client.wait(task.id, { timeoutMs: 30_000 })).state).toBe('exited')
  })

  test("a workspace task of daemon A cannot drive daemon B through B's socket, under its own path or a hard link", async () => {
    const workspace = mkdtempSync('/var/tmp/tend-peer-ws-')
    try {
      // A hard link reaches the socket even where B's home is hidden from the sandbox.
      const linked = join(workspace, 'b.sock')
      linkSync(socketB, linked)
      const before = await daemonB.client.list({ all: true })
      const attempts = [socketB, linked].map(
        (path) => `${shellQuote(process.execPath)} -e ${shellQuote(POST_SCRIPT)} ${shellQuote(path)} ${shellQuote(evilBody())}`,
      )
      const started = await daemonA.client.start({ command: attempts.join('; '), shell: true, sandbox: 'workspace', cwd: workspace, writablePaths: [] })
      const task = await daemonA.client.wait(started.id, { timeoutMs: 30_000 })
      const output = (await daemonA.client.read(task.id)).data
      expect(task.state, `task ${task.state} (${task.reason ?? ''}): ${output}`).toBe('exited')
      const answers = output
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Answer)
      expect(answers, output).toHaveLength(2)
      // Through its own path B's socket is refused, or hidden by the sandbox (no socket to reach).
      for (const answer of answers) expect([0, 403], JSON.stringify(answer)).toContain(answer.status)
      const throughLink = answers[1]!
      expect(throughLink.status, throughLink.body).toBe(403)
      expect(JSON.parse(throughLink.body)).toMatchObject({ code: 'TEND_ERR_SANDBOXED_CALLER' })
      expect(await daemonB.client.list({ all: true })).toEqual(before)
      expect(existsSync(canary)).toBe(false)
    } finally {
      rmSync(workspace, { recursive: true, force: true })
    }
  })

  test('a refused connection is closed after its answer', async () => {
    const sandboxed = await execa(
      'bwrap',
      [
        '--unshare-user',
        '--unshare-pid',
        '--die-with-parent',
        '--ro-bind',
        '/',
        '/',
        '--dev',
        '/dev',
        '--proc',
        '/proc',
        '--',
        process.execPath,
        '-e',
        // Keep-alive asked for: a second request on the same connection must find it closed.
        `const s = require('node:net').connect(process.argv[1]); let text = ''; s.on('data', (c) => (text += c)); s.on('close', () => console.log(JSON.stringify(text))); s.write('GET /v1/status HTTP/1.1\\r\\nhost: x\\r\\nconnection: keep-alive\\r\\n\\r\\nGET /v1/status HTTP/1.1\\r\\nhost: x\\r\\n\\r\\n')`,
        socketB,
      ],
      { reject: false, timeout: 30_000 },
    )
    expect(sandboxed.exitCode, sandboxed.stderr).toBe(0)
    const raw = JSON.parse(sandboxed.stdout) as string
    expect(raw).toMatch(/^HTTP\/1\.1 403 /)
    expect(raw.toLowerCase()).toContain('connection: close')
    expect(raw.match(/HTTP\/1\.1 /g)).toHaveLength(1)
  })
})

describe('the peer check in status', () => {
  test('`tend status --json` reports the peer check enforced', async () => {
    const result = await runCli(['status', '--json'], daemonA.env)
    expect(result.exitCode, result.stderr).toBe(0)
    expect(JSON.parse(result.stdout).peerCheck).toEqual({ enforced: true })
    const text = await runCli(['status'], daemonA.env)
    expect(text.stdout).toMatch(/^callers: +requests from sandboxed tasks are refused$/m)
  })
})

describe('the home registry', () => {
  test("is the user's own, wherever HOME and XDG_STATE_HOME point: it lists every daemon's home", async () => {
    const dir = homeRegistryDir(currentRegistryUser())
    expect(dir).toBe(join(userInfo().homedir, '.local', 'state', 'tend-homes'))
    const homes = await waitFor('both homes registered', () => {
      const known = knownHomes(dir)
      return known.includes(realpathSync(daemonA.home)) && known.includes(realpathSync(daemonB.home)) && known
    })
    expect(homes).not.toContain(join(stateDir, 'tend'))
    // The default home of a daemon with another HOME is listed too, once a daemon has run there.
    const otherHome = mkdtempSync('/var/tmp/tend-peer-otherhome-')
    const other = await startTestDaemon({ home: join(otherHome, 'tend'), env: { HOME: otherHome, XDG_STATE_HOME: join(otherHome, 'state') } })
    try {
      expect(knownHomes(dir)).toContain(realpathSync(other.home))
    } finally {
      await other.stop()
      rmSync(otherHome, { recursive: true, force: true })
    }
  })

  test("keeps a stopped or crashed daemon's home while the folder holds its marker, and prunes it once the folder is gone", async () => {
    const dir = homeRegistryDir(currentRegistryUser())
    const stopped = await startTestDaemon({ env: { XDG_STATE_HOME: stateDir } })
    const crashedHome = createTempHome()
    const crashed = await startTestDaemon({ home: crashedHome, env: { XDG_STATE_HOME: stateDir } })
    const stoppedHome = realpathSync(stopped.home)
    try {
      await waitFor('both homes registered', () => registeredHomes().includes(stoppedHome) && registeredHomes().includes(realpathSync(crashedHome)))
      stopped.process.kill('SIGTERM')
      await waitFor('the stopped daemon to exit', () => stopped.process.exitCode !== null)
      await crashed.crash()
      // Its config.json is read again at its next start: hidden and refused as long as it is a home.
      expect(knownHomes(dir)).toEqual(expect.arrayContaining([stoppedHome, realpathSync(crashedHome)]))
      await stopped.stop()
      expect(knownHomes(dir)).not.toContain(stoppedHome)
      expect(registeredHomes()).not.toContain(stoppedHome)
      expect(knownHomes(dir)).toContain(realpathSync(crashedHome))
      expect(knownHomes(dir)).toContain(realpathSync(daemonA.home))
    } finally {
      await assertNothingLeft(crashedHome)
      rmSync(crashedHome, { recursive: true, force: true })
    }
    expect(knownHomes(dir)).not.toContain(crashedHome)
  })
})

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`
}
