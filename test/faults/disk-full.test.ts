import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { spawnSync } from 'node:child_process'
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Value } from 'typebox/value'
import { TendClient, TendError, type Task, type TaskEvent } from '../../client/index.js'
import { FINISHED_STATES, SCHEMA_VERSION } from '../../protocol/index.js'
import { TaskSchema } from '../../protocol/schemas.js'
import { parseExitRecord } from '../../daemon/spawn/exit-file.js'
import { runCli } from '../helpers/cli.js'
import { isAlive } from '../helpers/processes.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

// The whole TEND_HOME (socket, daemon.log, spool) lives on a small tmpfs that the test fills.
const TMPFS_SIZE = '4m'
/** The client's and the CLI's request timeout here: a wedged daemon fails the test in seconds, not 30. */
const REQUEST_TIMEOUT_MS = 5000

let mountPoint: string
let work: string
let daemon: TestDaemon
let client: TendClient
let daemonStderr = ''
const filler = () => join(mountPoint, 'filler')

function mounted(path: string): boolean {
  return readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .some((line) => line.split(' ')[1] === path)
}

/** Writes a file until the disk refuses: whatever the daemon has written, nothing is left. */
function fillDisk(path: string): number {
  const chunk = Buffer.alloc(64 * 1024, 0x78)
  const fd = openSync(path, 'w')
  let written = 0
  try {
    for (;;) {
      try {
        written += writeSync(fd, chunk)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOSPC') return written
        throw error
      }
    }
  } finally {
    closeSync(fd)
  }
}

/** Every event since the daemon started, until `done` holds (the stream is replayed from seq 0). */
async function eventsUntil(what: string, done: (events: TaskEvent[]) => boolean): Promise<TaskEvent[]> {
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(), 15_000)
  const events: TaskEvent[] = []
  try {
    for await (const event of client.events({ since: 0, signal: controller.signal })) {
      events.push(event)
      if (done(events)) break
    }
  } finally {
    clearTimeout(timer)
  }
  if (!done(events)) throw new Error(`timed out after 15000ms waiting for ${what}; got ${events.map((event) => `${event.type}:${event.taskId}`).join(', ')}`)
  return events
}

/** An event that announces a task's end (a removal carries a finished task too, and is not one). */
const isEnding = (event: TaskEvent) => event.type !== 'task.removed' && (FINISHED_STATES as readonly string[]).includes(event.task.state)

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error(`the disk-full test mounts a tmpfs and needs root (running as uid ${process.getuid?.()})`)
  mountPoint = mkdtempSync(join(tmpdir(), 'tend-disk-full-'))
  work = mkdtempSync(join(tmpdir(), 'tend-disk-full-work-'))
  const mount = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${TMPFS_SIZE},mode=0700`, 'tmpfs', mountPoint], { encoding: 'utf8' })
  if (mount.status !== 0) throw new Error(`mount -t tmpfs on ${mountPoint} failed (${mount.status}): ${mount.stderr || mount.error?.message}`)
  // A folder inside the mount, so the helper can delete the home without touching the mount point.
  const home = join(mountPoint, 'home')
  mkdirSync(home, { mode: 0o700 })
  daemon = await startTestDaemon({ home })
  daemon.process.stderr!.on('data', (chunk: Buffer) => (daemonStderr += chunk.toString()))
  client = new TendClient({ home, autoStart: false, requestTimeoutMs: REQUEST_TIMEOUT_MS })
})

afterAll(async () => {
  try {
    client?.close()
    if (existsSync(filler())) unlinkSync(filler())
    if (daemon) {
      // A wedged daemon does not act on SIGTERM: it gets SIGKILL, and the test has failed anyway.
      if (daemon.process.exitCode === null && daemon.process.signalCode === null) {
        const exited = new Promise((resolve) => daemon.process.once('exit', resolve))
        daemon.process.kill('SIGTERM')
        const timer = setTimeout(() => daemon.process.kill('SIGKILL'), 15_000)
        await exited
        clearTimeout(timer)
      }
      await daemon.stop()
    }
  } finally {
    if (mountPoint) {
      if (mounted(mountPoint) && spawnSync('umount', [mountPoint]).status !== 0) spawnSync('umount', ['-l', mountPoint])
      rmSync(mountPoint, { recursive: true, force: true })
    }
    if (work) rmSync(work, { recursive: true, force: true })
  }
  expect(mounted(mountPoint), `${mountPoint} is still mounted`).toBe(false)
})

describe('a full disk under TEND_HOME', () => {
  let before: Task
  const go = () => join(work, 'go')

  test('a task running before the disk fills is running and recorded as running', async () => {
    // It ends (exit 7) when the test says so, writing nothing on the full disk.
    before = await client.start({ command: `while [ ! -e ${go()} ]; do sleep 0.05; done; exit 7`, shell: true, cwd: work })
    await waitFor(`the running record of ${before.id} on disk`, () => JSON.parse(readFileSync(join(before.spool, 'task.json'), 'utf8')).state === 'running')
    before = await client.get(before.id)
  })

  test('with the disk full, daemon.log fails over to stderr and the daemon keeps answering', async () => {
    fillDisk(filler())
    // Every request is logged: the first write that finds no room switches the log to stderr.
    await waitFor(`the daemon's notice on stderr that daemon.log failed (stderr so far: ${daemonStderr.slice(-2000)})`, async () => {
      await client.status()
      return daemonStderr.includes('daemon log file failed')
    })
    const status = await client.status()
    expect(status.pid).toBe(daemon.process.pid)
    expect(daemon.process.exitCode).toBeNull()
  })

  test('`tend status` answers within the CLI timeout', async () => {
    const result = await runCli(['status', '--json'], { ...daemon.env, TEND_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms` }, { timeoutMs: 30_000 })
    expect(result.stderr).toBe('')
    expect(result.exitCode).toBe(0)
    expect(JSON.parse(result.stdout)).toMatchObject({ pid: daemon.process.pid })
  })

  test('a new task is refused with 507 TEND_ERR_SPOOL_FULL and leaves nothing behind', async () => {
    const tasksBefore = (await client.list({ all: true })).map((task) => task.id)
    let refusal: TendError | undefined
    try {
      await client.start({ command: ['echo', 'never'], cwd: work })
    } catch (error) {
      refusal = error as TendError
    }
    expect(refusal, 'the submission was accepted on a full disk').toBeInstanceOf(TendError)
    expect({ code: refusal!.code, statusCode: refusal!.statusCode, retryable: refusal!.retryable }).toEqual({
      code: 'TEND_ERR_SPOOL_FULL',
      statusCode: 507,
      retryable: true,
    })
    expect(refusal!.message).toMatch(/no space left/)
    expect((await client.list({ all: true })).map((task) => task.id)).toEqual(tasksBefore)
    expect(readdirSync(join(daemon.home, 'spool')).filter((name) => !tasksBefore.includes(name))).toEqual([])
  })

  test('a task that ends while the disk is full is recorded at once, from the spool reserve, and announced once', async () => {
    writeFileSync(go(), '')
    await waitFor(`the process of ${before.id} (pid ${before.pid}) to end`, () => !isAlive(before.pid!))
    // The disk is still full: the reserve the daemon held back is given up for the record.
    const recorded = await waitFor(`the final record of ${before.id} on the full disk`, () => {
      const record = JSON.parse(readFileSync(join(before.spool, 'task.json'), 'utf8')) as Task
      return record.state === 'running' ? null : record
    })
    expect(existsSync(filler())).toBe(true)
    expect(recorded).toMatchObject({ state: 'exited', exitCode: 7 })
    expect(await client.get(before.id)).toMatchObject({ state: 'exited', exitCode: 7 })
    expect((await client.status()).spool).toMatchObject({ reserveHeld: false })
    expect(daemon.process.exitCode).toBeNull()

    unlinkSync(filler())
    await waitFor('the spool reserve made again once there is room', async () => (await client.status()).spool.reserveHeld)

    // A task started now runs; its end, on the same stream, comes after any repeat of the first.
    const after = await client.start({ command: ['sh', '-c', 'echo after the disk had room'], cwd: work })
    const ended = await client.wait(after.id, { timeoutMs: 10_000 })
    expect(ended).toMatchObject({ state: 'exited', exitCode: 0 })
    expect((await client.read(after.id)).data).toBe('after the disk had room\n')
    const events = await eventsUntil(`the end of ${after.id}`, (seen) => seen.some((event) => event.taskId === after.id && isEnding(event)))
    const endings = events.filter((event) => event.taskId === before.id && isEnding(event))
    expect(endings.map((event) => [event.type, event.task.state, event.task.exitCode])).toEqual([['task.exited', 'exited', 7]])
  })

  test('after space is back every task.json in the spool is whole and valid, and no temporary file is left', async () => {
    const known = new Set((await client.list({ all: true })).map((task) => task.id))
    const spool = join(daemon.home, 'spool')
    const folders = readdirSync(spool, { withFileTypes: true }).filter((entry) => entry.isDirectory())
    expect(folders.length).toBeGreaterThanOrEqual(2)
    for (const folder of folders) {
      expect(known.has(folder.name), `spool folder ${folder.name} belongs to a listed task`).toBe(true)
      const files = readdirSync(join(spool, folder.name)).sort()
      // exit.json is there once its keeper could write it (it retries while the disk is full).
      expect(
        files.filter((file) => file !== 'exit.json'),
        `files of ${folder.name}`,
      ).toEqual(['output.log', 'task.json'])
      if (files.includes('exit.json'))
        expect(parseExitRecord(readFileSync(join(spool, folder.name, 'exit.json'), 'utf8')), `exit.json of ${folder.name}`).not.toBeNull()
      const { schemaVersion, ...record } = JSON.parse(readFileSync(join(spool, folder.name, 'task.json'), 'utf8')) as Task & { schemaVersion: number }
      expect(schemaVersion).toBe(SCHEMA_VERSION)
      expect(record.id).toBe(folder.name)
      expect(
        [...Value.Errors(TaskSchema, record)].map((error) => `${error.instancePath} ${error.message}`),
        `task.json of ${folder.name}`,
      ).toEqual([])
    }
    expect(daemon.process.exitCode).toBeNull()
  })
})
