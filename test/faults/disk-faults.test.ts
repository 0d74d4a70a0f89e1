import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { spawnSync } from 'node:child_process'
import { request as httpRequest } from 'node:http'
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, unlinkSync, writeFileSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { TendClient, TendError, type SpoolEvent, type Task, type TaskEvent } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { isAlive } from '../helpers/processes.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/** The client's and the CLI's request timeout: a wedged daemon fails a test in seconds. */
const REQUEST_TIMEOUT_MS = 5000

function mounted(path: string): boolean {
  return readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .some((line) => line.split(' ')[1] === path)
}

/** Mount points at or under `path`, deepest first. */
function mountsWithin(path: string): string[] {
  return readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[1] ?? '')
    .filter((point) => point.startsWith(`${path}/`))
    .sort((a, b) => b.length - a.length)
}

/** Unmounts what a test mounted inside the tmpfs (the read-only bind of the spool). */
function unmountWithin(path: string): void {
  for (const point of mountsWithin(path)) if (spawnSync('umount', [point]).status !== 0) spawnSync('umount', ['-l', point])
}

function run(command: string, args: string[]): void {
  const result = spawnSync(command, args, { encoding: 'utf8' })
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed (${result.status}): ${result.stderr || result.error?.message}`)
}

/** Writes a file until the disk refuses: whatever was free is taken. */
function fillDisk(path: string): void {
  const chunk = Buffer.alloc(64 * 1024, 0x78)
  const fd = openSync(path, 'a')
  try {
    for (let size = chunk.length; size >= 512; ) {
      try {
        writeSync(fd, chunk, 0, size)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error
        size /= 2
      }
    }
  } finally {
    closeSync(fd)
  }
}

/** The record on disk, as the next daemon would read it. */
function onDisk(task: Task): Task {
  return JSON.parse(readFileSync(join(task.spool, 'task.json'), 'utf8')) as Task
}

/** A tmpfs of `size` with a daemon whose TEND_HOME is a folder in it (so the home can be deleted without touching the mount). */
interface DiskDaemon {
  mountPoint: string
  work: string
  daemon: TestDaemon
  client: TendClient
  stderr: () => string
  cliEnv: Record<string, string>
  close: () => Promise<void>
}

async function startOnTmpfs(size: string, prefix: string, env: Record<string, string> = {}): Promise<DiskDaemon> {
  if (process.getuid?.() !== 0) throw new Error(`this test mounts a tmpfs and needs root (running as uid ${process.getuid?.()})`)
  const mountPoint = mkdtempSync(join(tmpdir(), `${prefix}-`))
  const work = mkdtempSync(join(tmpdir(), `${prefix}-work-`))
  run('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', mountPoint])
  const home = join(mountPoint, 'home')
  mkdirSync(home, { mode: 0o700 })
  let daemon: TestDaemon | undefined
  let stderr = ''
  const close = async () => {
    try {
      unmountWithin(mountPoint)
      for (const name of ['filler', 'filler-2', 'filler-3']) if (existsSync(join(mountPoint, name))) unlinkSync(join(mountPoint, name))
      if (daemon) {
        // A wedged daemon does not act on SIGTERM: it gets SIGKILL, and the test has failed anyway.
        const child = daemon.process
        if (child.exitCode === null && child.signalCode === null) {
          const exited = new Promise((resolve) => child.once('exit', resolve))
          child.kill('SIGTERM')
          const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
          await exited
          clearTimeout(timer)
        }
        await daemon.stop()
      }
    } finally {
      unmountWithin(mountPoint)
      if (mounted(mountPoint) && spawnSync('umount', [mountPoint]).status !== 0) spawnSync('umount', ['-l', mountPoint])
      rmSync(mountPoint, { recursive: true, force: true })
      rmSync(work, { recursive: true, force: true })
    }
    expect(mounted(mountPoint), `${mountPoint} is still mounted`).toBe(false)
  }
  try {
    daemon = await startTestDaemon({ home, env })
  } catch (error) {
    await close()
    throw error
  }
  daemon.process.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const client = new TendClient({ home, autoStart: false, requestTimeoutMs: REQUEST_TIMEOUT_MS })
  const cliEnv = { ...daemon.env, TEND_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms` }
  return {
    mountPoint,
    work,
    daemon,
    client,
    stderr: () => stderr,
    cliEnv,
    close: async () => {
      client.close()
      await close()
    },
  }
}

/** Events since the daemon started until `done` holds. */
async function eventsUntil(client: TendClient, what: string, done: (events: TaskEvent[]) => boolean): Promise<TaskEvent[]> {
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(), 15_000)
  const events: TaskEvent[] = []
  try {
    for await (const event of client.events({ since: 0, signal: controller.signal })) {
      events.push(event)
      if (done(events)) break
    }
  } catch (error) {
    if (!controller.signal.aborted) throw error
  } finally {
    clearTimeout(timer)
  }
  if (!done(events)) throw new Error(`timed out after 15000ms waiting for ${what}; got ${events.map((event) => `${event.type}:${event.taskId}`).join(', ')}`)
  return events
}

/** Follows the events stream with spool events, from the daemon's first event, until stopped. */
function followSpoolEvents(client: TendClient): { tasks: TaskEvent[]; spool: SpoolEvent[]; stop: () => void } {
  const controller = new AbortController()
  const seen = { tasks: [] as TaskEvent[], spool: [] as SpoolEvent[], stop: () => controller.abort() }
  void (async () => {
    try {
      for await (const event of client.events({ since: 0, signal: controller.signal, onSpool: (spool) => seen.spool.push(spool) })) seen.tasks.push(event)
    } catch (error) {
      if (!controller.signal.aborted) throw error
    }
  })()
  return seen
}

/** Follows the events stream as any HTTP client would (raw SSE text), until stopped. */
function followRaw(home: string, path: string): { text: () => string; stop: () => void } {
  let text = ''
  const req = httpRequest({ socketPath: join(home, 'tend.sock'), path, headers: { accept: 'text/event-stream' } }, (res) => {
    res.setEncoding('utf8')
    res.on('data', (chunk: string) => (text += chunk))
    res.on('error', () => undefined)
  })
  req.on('error', () => undefined)
  req.end()
  return { text: () => text, stop: () => req.destroy() }
}

describe('a task that fills the spool disk', () => {
  let disk: DiskDaemon
  let filler: Task
  let toKill: Task
  let toStop: Task

  beforeAll(async () => {
    disk = await startOnTmpfs('6m', 'tend-disk-faults-full')
  })
  afterAll(async () => {
    await disk?.close()
  })

  test('its ending lands on the full disk (from the reserve), and wait answers it', async () => {
    const { client, work } = disk
    toKill = await client.start({ command: ['sleep', '600'], cwd: work })
    toStop = await client.start({ command: ['sleep', '600'], cwd: work })
    await waitFor('the two sleepers running on disk', () => onDisk(toKill).state === 'running' && onDisk(toStop).state === 'running')
    filler = await client.start({ command: ['head', '-c', '20M', '/dev/zero'], cwd: work })
    const ended = await client.wait(filler.id, { timeoutMs: 20_000 })
    expect(ended).toMatchObject({ state: 'exited', exitCode: 1 })
    expect(onDisk(filler)).toMatchObject({ state: 'exited', exitCode: 1 })
    // The reserve was spent on it.
    const status = await client.status()
    expect(status.spool).toMatchObject({ reserveHeld: false })
  })

  test('with the reserve spent and the disk full again, `tend kill` answers the ending (held in memory) at once', async () => {
    const { client, mountPoint, cliEnv } = disk
    fillDisk(join(mountPoint, 'filler'))
    const result = await runCli(['kill', toKill.id, '--json'], cliEnv, { timeoutMs: 20_000 })
    expect(result.stderr).toBe('')
    expect(result.exitCode).toBe(0)
    expect(JSON.parse(result.stdout)).toMatchObject({ id: toKill.id, state: 'killed' })
    expect(isAlive(toKill.pid!)).toBe(false)
    expect(await client.get(toKill.id)).toMatchObject({ state: 'killed' })
    expect(onDisk(toKill).state).toBe('running')
    const status = await client.status()
    expect(status.spool).toMatchObject({ writable: false, heldRecords: 1, reserveHeld: false })
    expect(status.spool.problem).toMatch(/no space/i)
    const text = await runCli(['status'], cliEnv, { timeoutMs: 20_000 })
    expect(text.stdout).toMatch(/not writable.*no space/i)
  })

  test('`tend rm` of a finished task works on the full disk; the held record lands and the reserve is made again', async () => {
    const { client, cliEnv } = disk
    const removed = await runCli(['rm', filler.id], cliEnv, { timeoutMs: 20_000 })
    expect(removed.stderr).toBe('')
    expect(removed.exitCode).toBe(0)
    await waitFor(`the killed record of ${toKill.id} on disk`, () => onDisk(toKill).state === 'killed', 15_000)
    let last: unknown
    await waitFor(
      'the spool writable again with its reserve in place',
      async () => {
        const { spool } = await client.status()
        last = spool
        return spool.writable && spool.reserveHeld && spool.heldRecords === 0 && spool.problem === null
      },
      15_000,
    ).catch((error: Error) => {
      throw new Error(`${error.message}; last status: ${JSON.stringify(last)}`)
    })
  })

  test('`tend rm` of a task whose ending is held in memory removes it', async () => {
    const { client, mountPoint, cliEnv, work } = disk
    const task = await client.start({ command: ['sleep', '600'], cwd: work })
    await waitFor(`${task.id} running on disk`, () => onDisk(task).state === 'running')
    fillDisk(join(mountPoint, 'filler-2'))
    // The reserve takes the first ending; the second finds no room.
    const first = await runCli(['kill', toStop.id, '--json'], cliEnv, { timeoutMs: 20_000 })
    expect(first.exitCode).toBe(0)
    await waitFor('the reserve spent', async () => !(await client.status()).spool.reserveHeld)
    fillDisk(join(mountPoint, 'filler-3'))
    const second = await runCli(['kill', task.id, '--json'], cliEnv, { timeoutMs: 20_000 })
    expect(second.exitCode).toBe(0)
    expect(onDisk(task).state).toBe('running')
    const removed = await runCli(['rm', task.id], cliEnv, { timeoutMs: 20_000 })
    expect(removed.stderr).toBe('')
    expect(removed.exitCode).toBe(0)
    expect(existsSync(task.spool)).toBe(false)
    await expect(client.get(task.id)).rejects.toMatchObject({ code: 'TEND_ERR_TASK_NOT_FOUND' })
  })

  test('`tend stop` on a full disk stops the daemon and its tasks', async () => {
    const { client, mountPoint, cliEnv, work, daemon } = disk
    for (const name of ['filler-2', 'filler-3']) unlinkSync(join(mountPoint, name))
    await waitFor('the reserve made again', async () => (await client.status()).spool.reserveHeld)
    const last = await client.start({ command: ['sleep', '600'], cwd: work })
    await waitFor(`${last.id} running on disk`, () => onDisk(last).state === 'running')
    fillDisk(join(mountPoint, 'filler-2'))
    const exited = new Promise((resolve) => daemon.process.once('exit', resolve))
    const stopped = await runCli(['stop'], cliEnv, { timeoutMs: 30_000 })
    expect(stopped.exitCode).toBe(0)
    await waitFor('the daemon to exit', () => daemon.process.exitCode !== null || daemon.process.signalCode !== null, 20_000)
    await exited
    expect(isAlive(last.pid!)).toBe(false)
  })
})

describe('a spool remounted read-only while tasks run', () => {
  let disk: DiskDaemon
  let waiting: Task
  let other: Task
  let spoolEvents: ReturnType<typeof followSpoolEvents>
  let rawPlain: ReturnType<typeof followRaw>
  const go = () => join(disk.work, 'go')
  const spool = () => join(disk.daemon.home, 'spool')

  beforeAll(async () => {
    disk = await startOnTmpfs('8m', 'tend-disk-faults-ro')
  })
  afterAll(async () => {
    spoolEvents?.stop()
    rawPlain?.stop()
    await disk?.close()
  })

  test('an ending while read-only is answered from memory: wait, get, list, events, kill', async () => {
    const { client, work } = disk
    spoolEvents = followSpoolEvents(client)
    rawPlain = followRaw(disk.daemon.home, '/v1/events?since=0')
    waiting = await client.start({ command: `while [ ! -e ${go()} ]; do sleep 0.05; done; exit 7`, shell: true, cwd: work })
    other = await client.start({ command: ['sleep', '600'], cwd: work })
    await waitFor('both tasks running on disk', () => onDisk(waiting).state === 'running' && onDisk(other).state === 'running')
    // A file system with files open for writing cannot be remounted read-only (EBUSY): the spool is
    // bound onto itself and that mount made read-only, as an operator's remount would leave it for
    // every new open and write, while the tasks' open output files go on.
    run('mount', ['--bind', spool(), spool()])
    run('mount', ['-o', 'remount,bind,ro', spool()])
    writeFileSync(go(), '')
    const ended = await client.wait(waiting.id, { timeoutMs: 15_000 })
    expect(ended).toMatchObject({ state: 'exited', exitCode: 7 })
    expect(await client.get(waiting.id)).toMatchObject({ state: 'exited', exitCode: 7 })
    expect((await client.list({ all: true })).find((task) => task.id === waiting.id)).toMatchObject({ state: 'exited' })
    expect(onDisk(waiting).state).toBe('running')
    const killed = await client.kill(other.id)
    expect(killed).toMatchObject({ state: 'killed' })
    const events = await eventsUntil(
      client,
      'both endings',
      (seen) =>
        seen.some((event) => event.taskId === waiting.id && event.type === 'task.exited') &&
        seen.some((event) => event.taskId === other.id && event.type === 'task.killed'),
    )
    expect(events.filter((event) => event.taskId === waiting.id && event.type === 'task.exited')).toHaveLength(1)
  })

  test('the daemon reports the spool as not writable, and refuses new tasks with 503 TEND_ERR_SPOOL_READ_ONLY', async () => {
    const { client, cliEnv, work } = disk
    const status = await client.status()
    expect(status.spool).toMatchObject({ writable: false, heldRecords: 2 })
    expect(status.spool.problem).toMatch(/read-only/i)
    // A subscriber that comes while the spool is unwritable is told so at once.
    const late = followSpoolEvents(client)
    try {
      await waitFor('a late subscriber told the spool is not writable', () =>
        late.spool.some((event) => !event.writable && /read-only/i.test(event.problem ?? '')),
      )
    } finally {
      late.stop()
    }
    const text = await runCli(['status'], cliEnv, { timeoutMs: 20_000 })
    expect(text.exitCode).toBe(0)
    expect(text.stdout).toMatch(/not writable.*read-only/i)
    let refusal: TendError | undefined
    try {
      await client.start({ command: ['echo', 'never'], cwd: work })
    } catch (error) {
      refusal = error as TendError
    }
    expect(refusal).toBeInstanceOf(TendError)
    expect({ code: refusal!.code, statusCode: refusal!.statusCode, retryable: refusal!.retryable }).toEqual({
      code: 'TEND_ERR_SPOOL_READ_ONLY',
      statusCode: 503,
      retryable: true,
    })
  })

  test('once the spool is writable again the held endings are written, and new tasks run', async () => {
    const { client, work } = disk
    run('mount', ['-o', 'remount,bind,rw', spool()])
    await waitFor(`the endings of ${waiting.id} and ${other.id} on disk`, () => onDisk(waiting).state === 'exited' && onDisk(other).state === 'killed', 15_000)
    expect(onDisk(waiting)).toMatchObject({ exitCode: 7 })
    await waitFor(
      'the spool reported writable',
      async () => {
        const { spool } = await client.status()
        return spool.writable && spool.heldRecords === 0 && spool.problem === null
      },
      15_000,
    )
    const after = await client.start({ command: ['echo', 'after'], cwd: work })
    expect(await client.wait(after.id, { timeoutMs: 10_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
  })

  test('the events stream (asked with spool=true) says when the spool became unwritable and when it was writable again; task events are unchanged', async () => {
    const { client } = disk
    await waitFor('a spool event saying writable again', () => spoolEvents.spool.some((event) => event.writable), 15_000)
    const [lost, back] = [spoolEvents.spool.find((event) => !event.writable), spoolEvents.spool.find((event) => event.writable)]
    expect(lost).toMatchObject({ type: 'spool', daemonId: (await client.status()).events.daemonId, writable: false })
    expect(lost!.problem).toMatch(/read-only/i)
    expect(back).toMatchObject({ type: 'spool', writable: true, problem: null })
    expect(spoolEvents.spool.indexOf(lost!)).toBeLessThan(spoolEvents.spool.indexOf(back!))
    // One event per change, not one per retry of a held record.
    expect(spoolEvents.spool.filter((event) => !event.writable)).toHaveLength(1)
    // Task events still come with their own numbering, and nothing but task events is yielded as one.
    expect(spoolEvents.tasks.every((event) => typeof event.seq === 'number' && event.type.startsWith('task.') && event.task.id === event.taskId)).toBe(true)
    expect(spoolEvents.tasks.some((event) => event.taskId === waiting.id && event.type === 'task.exited')).toBe(true)
    // A subscriber that did not ask for them got none (older clients parse every event as a task's).
    await waitFor(
      "the plain subscriber to get the new task's events",
      () => rawPlain.text().includes('event: task.exited') && rawPlain.text().split('event: task.').length > 9,
      15_000,
    )
    expect(rawPlain.text()).not.toMatch(/^event: spool$/m)
    expect(rawPlain.text()).not.toContain('"type":"spool"')
  })
})

describe('stdin sent while the disk is full', () => {
  let disk: DiskDaemon

  beforeAll(async () => {
    disk = await startOnTmpfs('4m', 'tend-disk-faults-stdin')
  })
  afterAll(async () => {
    await disk?.close()
  })

  test('what input.log could not keep is recorded on the task (inputLogLostBytes) and shown by `tend show`', async () => {
    const { client, mountPoint, work, cliEnv } = disk
    const task = await client.start({ command: ['sh', '-c', 'cat > /dev/null'], cwd: work, stdin: 'pipe' })
    await waitFor(`${task.id} running on disk`, () => onDisk(task).state === 'running')
    fillDisk(join(mountPoint, 'filler'))
    const input = Buffer.alloc(2906, 0x61)
    const result = await client.input(task.id, input)
    expect(result.acceptedBytes).toBe(input.length)
    const logged = existsSync(join(task.spool, 'input.log')) ? readFileSync(join(task.spool, 'input.log')).length : 0
    expect(logged).toBeLessThan(input.length)
    expect(result.task.inputLogLostBytes).toBe(input.length - logged)
    expect((await client.get(task.id)).inputLogLostBytes).toBe(input.length - logged)
    const shown = await runCli(['show', task.id], cliEnv, { timeoutMs: 20_000 })
    expect(shown.stdout).toMatch(new RegExp(`input lost: +${input.length - logged} bytes`))
    unlinkSync(join(mountPoint, 'filler'))
    await client.kill(task.id)
  })
})

describe('a terminal task writing into a full disk', () => {
  let disk: DiskDaemon

  beforeAll(async () => {
    disk = await startOnTmpfs('6m', 'tend-disk-faults-tty')
  })
  afterAll(async () => {
    await disk?.close()
  })

  test("every line is in output.log, or what is missing is the task's outputLostBytes (shown by `tend show`)", async () => {
    const { client, mountPoint, work, cliEnv } = disk
    const go = join(work, 'go')
    const lines = 300_000
    const task = await client.start({
      command: `while [ ! -e ${go} ]; do sleep 0.05; done; seq 1 ${lines}`,
      shell: true,
      cwd: work,
      tty: { cols: 80, rows: 24 },
    })
    await waitFor(`${task.id} running on disk`, () => onDisk(task).state === 'running')
    fillDisk(join(mountPoint, 'filler'))
    writeFileSync(go, '')
    const ended = await client.wait(task.id, { timeoutMs: 30_000 })
    expect(ended).toMatchObject({ state: 'exited', exitCode: 0 })
    // The terminal turns each newline into CR LF.
    let expected = 0
    for (let line = 1; line <= lines; line++) expected += String(line).length + 2
    const kept = readFileSync(join(task.spool, 'output.log')).length
    // The disk was full: output was lost, so the test shows what tend says of it.
    expect(kept).toBeLessThan(expected)
    expect(ended.outputLostBytes).toBe(expected - kept)
    expect((await client.get(task.id)).outputLostBytes).toBe(expected - kept)
    const shown = await runCli(['show', task.id], cliEnv, { timeoutMs: 20_000 })
    expect(shown.stdout).toMatch(new RegExp(`output lost: +${expected - kept} bytes`))
    unlinkSync(join(mountPoint, 'filler'))
    await waitFor(`the ending of ${task.id} on disk with its loss`, () => onDisk(task).outputLostBytes === expected - kept, 15_000)
  })
})
