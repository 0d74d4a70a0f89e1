import { afterEach, describe, expect, test } from 'vitest'
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { TendClient, type Task } from '../../client/index.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { assertNothingLeft, createTempHome, daemonEnv, FIXTURES, killEverythingOf, startTestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * A task started with endsWithDaemon (a supervisor option no HTTP body carries: cluster tasks that
 * may be retried elsewhere use it) ends when its daemon ends, however it ends. The daemon runs in a
 * child process (test/fixtures/in-process-daemon.mjs) whose supervisor the test reaches directly.
 */

/** How long a task's whole tree may take to go once its daemon is gone: milliseconds are expected. */
const LIFELINE_END_TIMEOUT_MS = 5000
const DAEMON_START_TIMEOUT_MS = 30_000
const DAEMON_ENDED_REASON = 'its daemon ended, and the task with it (it was started to end with its daemon)'

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

interface InProcessDaemon {
  process: ChildProcess
  client: TendClient
  start: (body: Record<string, unknown>, options?: Record<string, unknown>) => Promise<Task>
  crash: () => Promise<void>
  exited: Promise<void>
}

/** The fixture daemon on `home`; every process of the home and the home itself go after the test. */
async function startInProcessDaemon(home: string, env: Record<string, string> = {}): Promise<InProcessDaemon> {
  const child = spawn(process.execPath, [join(FIXTURES, 'in-process-daemon.mjs')], { env: daemonEnv(home, env), stdio: ['pipe', 'pipe', 'pipe'] })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const client = new TendClient({ home, autoStart: false })
  cleanups.push(async () => {
    client.close()
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await exited
    await killEverythingOf(home)
    rmSync(home, { recursive: true, force: true })
  })
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const answers: string[] = []
  let rest = ''
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = (rest + chunk.toString()).split('\n')
    rest = lines.pop()!
    answers.push(...lines)
  })
  await waitFor(
    `the in-process daemon on ${home} to be ready (stderr: ${stderr})`,
    () => {
      if (child.exitCode !== null) throw new Error(`it exited with ${child.exitCode}: ${stderr}`)
      return answers[0] === '{"ready":true}'
    },
    DAEMON_START_TIMEOUT_MS,
  )
  answers.shift()
  const start = async (body: Record<string, unknown>, options: Record<string, unknown> = {}) => {
    child.stdin!.write(`${JSON.stringify({ body, options })}\n`)
    const line = await waitFor('the in-process daemon to answer a start', () => answers.shift())
    const answer = JSON.parse(line) as Task | { error: string }
    if ('error' in answer) throw new Error(`start refused: ${answer.error}`)
    return answer
  }
  const crash = async () => {
    child.kill('SIGKILL')
    await exited
    client.close()
  }
  return { process: child, client, start, crash, exited }
}

function readRecord(home: string, id: string): Task {
  return JSON.parse(readFileSync(join(home, 'spool', id, 'task.json'), 'utf8')) as Task
}

async function runningOnDisk(home: string, id: string): Promise<void> {
  await waitFor(`task ${id} recorded running, with its keeper`, () => {
    const record = readRecord(home, id) as Task & { keeper?: unknown }
    return record.state === 'running' && record.keeper
  })
}

/** test/fixtures/escaping-tree.sh's pids in `dir`, once all three are running. */
async function escapees(dir: string): Promise<number[]> {
  return waitFor(`the escaping tree in ${dir} to start`, () => {
    const names = ['setsid', 'orphan', 'ignore-term']
    if (!names.every((name) => existsSync(join(dir, `${name}.pid`)))) return undefined
    return names.map((name) => Number(readFileSync(join(dir, `${name}.pid`), 'utf8')))
  })
}

function taskProcesses(id: string): number[] {
  return processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive)
}

function scratchDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tend-ends-with-daemon-'))
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

describe('a task started to end with its daemon', () => {
  test('is gone with all it started once its daemon is killed -9, and the next daemon records it lost saying why; a task beside it runs on', async () => {
    const home = createTempHome()
    const first = await startInProcessDaemon(home)
    const [endingDir, keptDir] = [scratchDir(), scratchDir()]
    const tree = (dir: string) => ({ command: ['sh', join(FIXTURES, 'escaping-tree.sh'), dir], cwd: dir })
    const ending = await first.start(tree(endingDir), { endsWithDaemon: true })
    const kept = await first.start(tree(keptDir))
    await Promise.all([runningOnDisk(home, ending.id), runningOnDisk(home, kept.id)])
    // The lasting processes of each tree (its loop's `sleep 1`s come and go): leader, keeper, escapees.
    const lasting = async (id: string, dir: string) => {
      const { pid, keeper } = readRecord(home, id) as Task & { keeper: { pid: number } }
      return [pid!, keeper.pid, ...(await escapees(dir))]
    }
    const endingPids = await lasting(ending.id, endingDir)
    const keptPids = await lasting(kept.id, keptDir)

    await first.crash()
    await waitFor(
      'the whole tree of the task that ends with its daemon to be gone',
      () => endingPids.every((pid) => !isAlive(pid)) && taskProcesses(ending.id).length === 0,
      LIFELINE_END_TIMEOUT_MS,
    )
    expect(keptPids.filter(isAlive)).toEqual(keptPids)

    const second = await startTestDaemon({ home })
    cleanups.push(() => second.stop())
    expect(await second.client.get(ending.id)).toMatchObject({ state: 'lost', reason: DAEMON_ENDED_REASON, stoppedBy: null })
    expect(await second.client.get(kept.id)).toMatchObject({ state: 'running' })
    expect(keptPids.filter(isAlive)).toEqual(keptPids)
  })

  test('a restart (stop with keepTasks) stops it first, recorded killed by daemon-stop saying why, and hands the task beside it over', async () => {
    const home = createTempHome()
    const first = await startInProcessDaemon(home)
    const cwd = scratchDir()
    const ending = await first.start({ command: ['sleep', '1000'], cwd }, { endsWithDaemon: true })
    const kept = await first.start({ command: ['sleep', '1000'], cwd })
    await Promise.all([runningOnDisk(home, ending.id), runningOnDisk(home, kept.id)])

    expect(await first.client.stopDaemon({ keepTasks: true })).toMatchObject({ stopped: true })
    await first.exited
    expect(readRecord(home, ending.id)).toMatchObject({
      state: 'killed',
      stoppedBy: 'daemon-stop',
      reason: expect.stringContaining('it was started to end with its daemon'),
    })
    expect(taskProcesses(ending.id)).toEqual([])
    expect(taskProcesses(kept.id).length).toBeGreaterThan(0)

    const second = await startTestDaemon({ home })
    cleanups.push(() => second.stop())
    expect(await second.client.get(kept.id)).toMatchObject({ state: 'running' })
    expect(await second.client.get(ending.id)).toMatchObject({ state: 'killed', stoppedBy: 'daemon-stop' })
  })

  test("is recorded lost, saying why, when the daemon's process spawner dies under it (the daemon living on)", async () => {
    const home = createTempHome()
    const daemon = await startInProcessDaemon(home)
    const task = await daemon.start({ command: ['sleep', '1000'], cwd: scratchDir() }, { endsWithDaemon: true })
    await runningOnDisk(home, task.id)
    const helper = childrenNamed(daemon.process.pid!, 'tend-spawner')
    expect(helper).toHaveLength(1)
    process.kill(helper[0]!, 'SIGKILL')

    expect(await daemon.client.wait(task.id, { timeoutMs: LIFELINE_END_TIMEOUT_MS })).toMatchObject({
      state: 'lost',
      reason: "tend's process spawner ended, and the task with it (it was started to end with its daemon)",
    })
    expect(taskProcesses(task.id)).toEqual([])
    await daemon.client.stopDaemon()
    await daemon.exited
    await assertNothingLeft(home)
  })

  test('fails under the node spawner, which cannot promise it, with a reason that says so', async () => {
    const home = createTempHome()
    const daemon = await startInProcessDaemon(home, { TEND_SPAWNER: 'node' })
    const task = await daemon.start({ command: ['sleep', '1000'], cwd: scratchDir() }, { endsWithDaemon: true })
    expect(await daemon.client.wait(task.id)).toMatchObject({ state: 'failed', reason: expect.stringContaining('end with its daemon') })
    await daemon.client.stopDaemon()
    await daemon.exited
    await assertNothingLeft(home)
  })
})

/** Pids whose parent is `pid` and whose name (comm) is `name`. */
function childrenNamed(pid: number, name: string): number[] {
  const found: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (ppid === pid && comm === name) found.push(Number(entry))
    } catch {
      // gone
    }
  }
  return found
}
