import { afterEach, describe, expect, test } from 'vitest'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Task } from '../../client/index.js'
import { createTempHome, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/** What a task used (`usage`, once it has ended) and what it uses now (`live`, only when asked), with real workloads. */

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

const MiB = 1024 * 1024
/** /usr/bin's: a strict sandbox shows the system's folders, not a user's pyenv. */
const PYTHON = '/usr/bin/python3'
/**
 * One second of CPU time, counted by the process itself from its start (its interpreter's start-up
 * included), then what it used by that clock (`cpu_ms=N`): a busy loop may pass the second by a good
 * deal where the process clock moves in steps (0.1 to 0.2 s on a virtual machine measured here), so
 * the figures are held to what the process says it used.
 */
const BUSY_SECOND = 'import time\nwhile time.process_time() < 1.0: pass\nprint("cpu_ms=%d" % (time.process_time() * 1000))\n'
/** 200 MiB allocated and every page of it written (a bytes repeat fills it), held until the process ends. */
const TOUCH_200_MIB = `data = b"\\x01" * (200 * ${MiB})\nprint(len(data))\n`

/** One second of CPU time (as BUSY_SECOND), then `done <ms used>`, then asleep until killed. */
const BUSY_SECOND_THEN_SLEEP =
  'import time\nwhile time.process_time() < 1.0: pass\nprint("done %d" % (time.process_time() * 1000), flush=True)\ntime.sleep(3600)\n'

/** What a probe said it used by its own clock (`cpu_ms=N` or `done N`), at least the second it was to use. */
function saidCpuMs(output: string): number {
  const said = /(?:cpu_ms=|done )(\d+)\n$/.exec(output)
  if (!said) throw new Error(`the probe did not say what it used: ${JSON.stringify(output)}`)
  const ms = Number(said[1])
  expect(ms).toBeGreaterThanOrEqual(1000)
  return ms
}
/** Busy until killed, printing its own CPU time in milliseconds (from its start) at every 5 ms of it. */
const BUSY_COUNTING =
  'import time\nnext = 0.005\nwhile True:\n  used = time.process_time()\n  if used >= next:\n    print(int(used * 1000), flush=True)\n    next = used + 0.005\n'

function expectWithinTenPercent(cpuMs: number, knownMs: number, task: Task): void {
  expect(cpuMs, JSON.stringify(task)).toBeGreaterThanOrEqual(knownMs * 0.9)
  expect(cpuMs, JSON.stringify(task)).toBeLessThanOrEqual(knownMs * 1.1)
}

async function daemonFor(): Promise<TestDaemon> {
  const daemon = await startTestDaemon()
  cleanups.push(() => daemon.stop())
  return daemon
}

async function runToEnd(daemon: TestDaemon, command: string[], sandbox: 'off' | 'strict', cwd?: string): Promise<Task> {
  const started = await daemon.client.start({ command, sandbox, ...(cwd ? { cwd } : {}) })
  const ended = await daemon.client.wait(started.id, { timeoutMs: 60_000 })
  expect(ended, JSON.stringify(ended)).toMatchObject({ state: 'exited', exitCode: 0 })
  return ended
}

function recordOnDisk(daemon: TestDaemon, id: string): Task {
  return recordOn(daemon.home, id)
}

function recordOn(home: string, id: string): Task {
  return JSON.parse(readFileSync(join(home, 'spool', id, 'task.json'), 'utf8')) as Task
}

describe.each([
  { sandbox: 'off' as const, source: 'rusage' },
  { sandbox: 'strict' as const, source: 'cgroup' },
])('usage of a task with sandbox $sandbox ($source)', ({ sandbox, source }) => {
  test('the CPU time of a one-second busy loop is within 10% of a second, in task.json', async () => {
    const daemon = await daemonFor()
    const ended = await runToEnd(daemon, [PYTHON, '-c', BUSY_SECOND], sandbox)
    const usage = recordOnDisk(daemon, ended.id).usage
    expect(usage, JSON.stringify(ended)).toMatchObject({ source })
    expectWithinTenPercent(usage!.cpuUserMs + usage!.cpuSystemMs, saidCpuMs((await daemon.client.read(ended.id)).data), ended)
    expect(ended.usage).toEqual(usage)
  })

  test('the peak memory of a process that touches 200 MiB is within 10% of 200 MiB', async () => {
    const daemon = await daemonFor()
    const ended = await runToEnd(daemon, [PYTHON, '-c', TOUCH_200_MIB], sandbox)
    const usage = recordOnDisk(daemon, ended.id).usage
    expect(usage, JSON.stringify(ended)).toMatchObject({ source })
    expect(usage!.peakMemoryBytes, JSON.stringify(usage)).toBeGreaterThanOrEqual(200 * MiB)
    expect(usage!.peakMemoryBytes, JSON.stringify(usage)).toBeLessThanOrEqual(220 * MiB)
  })
})

describe('usage of a task', () => {
  test('bytes written count a known write of 8 MiB to a file', async () => {
    const daemon = await daemonFor()
    const folder = mkdtempSync(join(tmpdir(), 'tend-usage-write-'))
    cleanups.push(() => rmSync(folder, { recursive: true, force: true }))
    const ended = await runToEnd(daemon, ['sh', '-c', 'head -c 8388608 /dev/zero > written.bin'], 'off', folder)
    const usage = ended.usage!
    expect(usage.writeBytes, JSON.stringify(usage)).toBeGreaterThanOrEqual(8 * MiB)
    expect(usage.writeBytes, JSON.stringify(usage)).toBeLessThanOrEqual(9 * MiB)
  })

  test('a task that ends while no daemon runs has what it used recorded by the next daemon, from its exit file', async () => {
    const home = createTempHome()
    const gate = join(home, 'gate')
    const first = await startTestDaemon({ home })
    const started = await first.client.start({
      command: [
        PYTHON,
        '-c',
        `import os, time\nwhile not os.path.exists(${JSON.stringify(gate)}): time.sleep(0.01)\nstart = time.process_time()\nwhile time.process_time() - start < 0.3: pass\n`,
      ],
    })
    await waitFor(
      'the running record, with its keeper, on disk',
      () => recordOn(home, started.id).state === 'running' && 'keeper' in recordOn(home, started.id),
    )
    await first.crash()
    first.client.close()
    writeFileSync(gate, '')
    await waitFor('the keeper to write the exit file', () => existsSync(join(home, 'spool', started.id, 'exit.json')))
    const second = await startTestDaemon({ home })
    cleanups.push(() => second.stop())
    const recovered = await second.client.get(started.id)
    expect(recovered, JSON.stringify(recovered)).toMatchObject({ state: 'exited', exitCode: 0, usage: { source: 'rusage' } })
    expect(recovered.usage!.cpuUserMs + recovered.usage!.cpuSystemMs).toBeGreaterThanOrEqual(270)
    expect(recordOn(home, started.id).usage).toEqual(recovered.usage)
  })

  test.each([
    { figures: 'absurd', cpuUserMs: Number.MAX_SAFE_INTEGER, recorded: false },
    { figures: 'plausible', cpuUserMs: 5, recorded: true },
  ])('an exit file a task under off forged with $figures figures: only plausible ones reach the record', async ({ cpuUserMs, recorded }) => {
    const { home, started, exitFile } = await endedWhileNoDaemon()
    // What a process of the task (the daemon's uid) can write in its place, keeping the ending.
    const forged = { ...JSON.parse(readFileSync(exitFile, 'utf8')), cpuUserMs }
    const large = recorded
      ? {}
      : {
          cpuSystemMs: Number.MAX_SAFE_INTEGER,
          peakMemoryBytes: Number.MAX_SAFE_INTEGER,
          readBytes: Number.MAX_SAFE_INTEGER,
          writeBytes: Number.MAX_SAFE_INTEGER,
        }
    writeFileSync(exitFile, `${JSON.stringify({ ...forged, ...large })}\n`)
    const second = await startTestDaemon({ home })
    cleanups.push(() => second.stop())
    const recovered = await second.client.get(started.id)
    expect(recovered, JSON.stringify(recovered)).toMatchObject({ state: 'exited', exitCode: 0 })
    if (recorded) expect(recovered.usage, JSON.stringify(recovered)).toMatchObject({ cpuUserMs: 5, source: 'rusage' })
    else expect(recovered, JSON.stringify(recovered)).not.toHaveProperty('usage')
    expect(recordOn(home, started.id).usage).toEqual(recovered.usage)
  })

  test.each([
    { when: 'before its start', endedAtMs: 1 },
    { when: 'in the far future', endedAtMs: 8_640_000_000_000_000 },
  ])('an exit file a task under off forged with an end $when: the record ends between its start and the recovery', async ({ endedAtMs }) => {
    const { home, started, exitFile } = await endedWhileNoDaemon()
    writeFileSync(exitFile, `${JSON.stringify({ ...JSON.parse(readFileSync(exitFile, 'utf8')), endedAtMs })}\n`)
    const second = await startTestDaemon({ home })
    cleanups.push(() => second.stop())
    const recovered = await second.client.get(started.id)
    const startedAt = Date.parse(recovered.startedAt!)
    const endedAt = Date.parse(recovered.endedAt!)
    expect(recovered.endedAt, JSON.stringify(recovered)).toMatch(/^\d{4}-\d{2}-\d{2}T/)
    expect(endedAt).toBeGreaterThanOrEqual(startedAt)
    expect(endedAt).toBeLessThanOrEqual(Date.now())
  })

  test('a killed task records what it used too', async () => {
    const daemon = await daemonFor()
    const started = await daemon.client.start({ command: [PYTHON, '-c', 'import time\nprint("up", flush=True)\nwhile True: pass\n'] })
    await waitFor('the task to print up', async () => (await daemon.client.read(started.id)).data === 'up\n')
    await daemon.client.kill(started.id)
    const ended = await daemon.client.wait(started.id, { timeoutMs: 30_000 })
    expect(ended).toMatchObject({ state: 'killed', usage: { source: 'rusage' } })
    expect(ended.usage!.cpuUserMs).toBeGreaterThan(0)
  })

  test("a shell whose busy child is killed with it (tend kill) records the child's CPU time too, within 10%", async () => {
    const daemon = await daemonFor()
    const started = await daemon.client.start({ command: ['sh', '-c', `${PYTHON} -c "$0"`, BUSY_SECOND_THEN_SLEEP] })
    const said = await waitFor('the busy child to print done', async () => /^done \d+\n$/.exec((await daemon.client.read(started.id)).data)?.[0])
    await daemon.client.kill(started.id)
    const ended = await daemon.client.wait(started.id, { timeoutMs: 30_000 })
    expect(ended).toMatchObject({ state: 'killed', usage: { source: 'rusage' } })
    expectWithinTenPercent(ended.usage!.cpuUserMs + ended.usage!.cpuSystemMs, saidCpuMs(said), ended)
  })

  test("a shell that exits by itself while its busy child is being stopped records the child's CPU time too, within 10%", async () => {
    const daemon = await daemonFor()
    const started = await daemon.client.start({ command: ['sh', '-c', `trap 'exit 0' TERM; ${PYTHON} -c "$0" & wait`, BUSY_SECOND_THEN_SLEEP] })
    const said = await waitFor('the busy child to print done', async () => /^done \d+\n$/.exec((await daemon.client.read(started.id)).data)?.[0])
    await daemon.client.kill(started.id)
    const ended = await daemon.client.wait(started.id, { timeoutMs: 30_000 })
    expect(ended, JSON.stringify(ended)).toMatchObject({ usage: { source: 'rusage' } })
    expectWithinTenPercent(ended.usage!.cpuUserMs + ended.usage!.cpuSystemMs, saidCpuMs(said), ended)
  })

  test("a shell whose busy child times out with it records the child's CPU time too, within 10% of what the child counted last", async () => {
    const daemon = await daemonFor()
    const started = await daemon.client.start({ command: ['sh', '-c', `${PYTHON} -c "$0"`, BUSY_COUNTING], timeoutMs: 3000 })
    const ended = await daemon.client.wait(started.id, { timeoutMs: 30_000 })
    expect(ended).toMatchObject({ state: 'timed_out', usage: { source: 'rusage' } })
    const counted = (await daemon.client.read(started.id, { tail: 2 })).data.trim().split('\n').map(Number)
    const lastCountedMs = counted.at(-1)!
    expect(lastCountedMs, 'the busy child counted some CPU time before its timeout').toBeGreaterThan(0)
    expectWithinTenPercent(ended.usage!.cpuUserMs + ended.usage!.cpuSystemMs, lastCountedMs, ended)
  })

  test('live figures appear on a running task only when asked, and never on an ended one', async () => {
    const daemon = await daemonFor()
    const started = await daemon.client.start({ command: [PYTHON, '-c', `data = b"\\x01" * (50 * ${MiB})\nprint("up", flush=True)\nwhile True: pass\n`] })
    await waitFor('the task to print up', async () => (await daemon.client.read(started.id)).data === 'up\n')
    expect(await daemon.client.get(started.id)).not.toHaveProperty('live')
    expect((await daemon.client.list()).find((task) => task.id === started.id)).not.toHaveProperty('live')
    // A busy loop's share of a core depends on the machine's load: what is asserted is that it is counted.
    const seen = new Set<string>()
    const live = await waitFor('a second live sample with CPU time in it', async () => {
      const task = await daemon.client.get(started.id, { live: true })
      if (task.live) seen.add(task.live.sampledAt)
      return task.live && seen.size >= 2 && task.live.cpuPercent > 0 ? task.live : null
    })
    // At most one sample a second: asks in between answer the last one.
    const times = [...seen].map(Date.parse).sort((a, b) => a - b)
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(1000)
    expect(live.memoryBytes).toBeGreaterThanOrEqual(50 * MiB)
    expect(Number.isNaN(Date.parse(live.sampledAt))).toBe(false)
    const listed = (await daemon.client.list({ live: true })).find((task) => task.id === started.id)
    expect(listed?.live?.memoryBytes).toBeGreaterThanOrEqual(50 * MiB)
    await daemon.client.kill(started.id)
    const ended = await daemon.client.wait(started.id, { timeoutMs: 30_000 })
    expect(await daemon.client.get(ended.id, { live: true })).not.toHaveProperty('live')
    expect(recordOnDisk(daemon, ended.id)).not.toHaveProperty('live')
  })
})

/** A task under off that ends while no daemon runs (its daemon crashed): its keeper's exit file is there for the next daemon. */
async function endedWhileNoDaemon(): Promise<{ home: string; started: Task; exitFile: string }> {
  const home = createTempHome()
  const gate = join(home, 'gate')
  const first = await startTestDaemon({ home })
  const started = await first.client.start({
    command: [PYTHON, '-c', `import os, time\nwhile not os.path.exists(${JSON.stringify(gate)}): time.sleep(0.01)\n`],
  })
  await waitFor('the running record, with its keeper, on disk', () => recordOn(home, started.id).state === 'running' && 'keeper' in recordOn(home, started.id))
  await first.crash()
  first.client.close()
  writeFileSync(gate, '')
  const exitFile = join(home, 'spool', started.id, 'exit.json')
  await waitFor('the keeper to write the exit file', () => existsSync(exitFile))
  return { home, started, exitFile }
}
