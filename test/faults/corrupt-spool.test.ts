import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { chmodSync, chownSync, cpSync, existsSync, lstatSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { pino } from 'pino'
import { isTendError, TendClient, type Task } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { processesWithEnv } from '../helpers/processes.js'
import { checkUnprivilegedUser, createTempHome, FIXTURES, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { CorruptEntries } from '../../daemon/store/corrupt-entries.js'
import { SpoolCleanup } from '../../daemon/store/spool-cleanup.js'
import { readSpoolEntry } from '../../spool/index.js'

type CleanupStore = ConstructorParameters<typeof SpoolCleanup>[2]

/** A good finished task as the first daemon left it, and everything it printed. */
interface GoodTask {
  task: Task
  output: string
}

/**
 * Runs a few tasks with a first daemon on `home` and stops it cleanly, leaving their spool for the
 * test to damage copies of.
 */
async function runGoodTasks(home: string): Promise<GoodTask[]> {
  const first = await startTestDaemon({ home })
  try {
    const commands: string[][] = [
      ['echo', 'the first good task'],
      ['sh', '-c', 'echo partial; exit 3'],
      ['node', join(FIXTURES, 'write-bytes.mjs'), '5000'],
    ]
    const good: GoodTask[] = []
    for (const command of commands) {
      const started = await first.client.start({ command })
      await first.client.wait(started.id)
      good.push({ task: (await first.client.get(started.id))!, output: (await first.client.read(started.id)).data })
    }
    return good
  } finally {
    await first.client.stopDaemon()
    await waitFor(`the first daemon on ${home} to exit`, () => first.process.exitCode !== null || first.process.signalCode !== null)
    first.client.close()
  }
}

/** However the file ends, no process of the home is left and the home is gone. */
function removeHome(home: string): void {
  for (const pid of processesWithEnv(`TEND_HOME=${home}`)) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // already gone
    }
  }
  rmSync(home, { recursive: true, force: true })
}

/** Damages copies of a good task's folder in the spool, each in one way. */
function createPlanter(home: string, template: Task) {
  const spool = join(home, 'spool')
  const templateRecord = JSON.parse(readFileSync(join(spool, template.id, 'task.json'), 'utf8')) as Record<string, unknown>
  return {
    folder: (id: string) => join(spool, id),
    /** A copy of the template's folder (its output.log too) under `id`, with task.json as given. */
    copy(id: string, record: Record<string, unknown> | string | null) {
      cpSync(join(spool, template.id), join(spool, id), { recursive: true })
      rmSync(join(spool, id, 'task.json'))
      if (record !== null) writeFileSync(join(spool, id, 'task.json'), typeof record === 'string' ? record : `${JSON.stringify(record, null, 2)}\n`)
    },
    /** The template's record, moved to `id` and changed. */
    record(id: string, changes: Record<string, unknown> = {}, drop: string[] = []) {
      const record: Record<string, unknown> = { ...templateRecord, id, spool: join(spool, id), ...changes }
      for (const key of drop) delete record[key]
      return record
    },
    text: JSON.stringify(templateRecord, null, 2),
  }
}

/** The quota of the daemon over the corrupt spool below: just above what its entries take. */
const QUOTA_KIB = 160

describe('a spool with corrupt entries beside good tasks', () => {
  let home = ''
  let good: GoodTask[] = []
  let daemon: TestDaemon | undefined
  /** What was planted, and what the reason must name. */
  let planted: Array<{ id: string; reason: RegExp }> = []

  beforeAll(async () => {
    home = createTempHome()
    good = await runGoodTasks(home)
    const plant = createPlanter(home, good[0]!.task)
    const spool = join(home, 'spool')
    planted = [
      { id: 'truncated001', reason: /^task\.json is not valid JSON/ },
      { id: 'emptyobject1', reason: /^task\.json invalid: \/schemaVersion is required; \/id is required; .*and \d+ more/ },
      { id: 'nocreatedat1', reason: /^task\.json invalid: \/createdAt is required$/ },
      { id: 'bogusstate01', reason: /^task\.json invalid: \/state must be one of queued, running, .* \(got "bogus"\)$/ },
      { id: 'nooutputbyt1', reason: /^task\.json invalid: \/outputBytes is required$/ },
      { id: 'wrongtype001', reason: /^task\.json invalid: \/exitCode must be integer \(got "0"\)$/ },
      { id: 'baddate00001', reason: /^task\.json invalid: \/endedAt must be an ISO 8601 date-time \(got "yesterday"\)$/ },
      { id: 'schemav20001', reason: /^task\.json has schemaVersion 2; this tend reads schemaVersion 1$/ },
      { id: 'recordisdir1', reason: /^task\.json is a folder, not a regular file$/ },
      { id: 'symlinkrec01', reason: /^task\.json is a symbolic link, not a regular file$/ },
      { id: 'fileentry001', reason: /^the spool entry is a file, not a folder$/ },
      { id: 'norecord0001', reason: /^task\.json is missing$/ },
      { id: 'otherid00001', reason: new RegExp(`^task\\.json names another task: ${good[1]!.task.id}$`) },
    ]
    plant.copy('truncated001', plant.text.slice(0, Math.floor(plant.text.length / 2)).replace(/"[0-9a-z]{12}"/, '"truncated001"'))
    plant.copy('emptyobject1', '{}')
    plant.copy('nocreatedat1', plant.record('nocreatedat1', {}, ['createdAt']))
    plant.copy('bogusstate01', plant.record('bogusstate01', { state: 'bogus', owner: 'agent-1' }))
    plant.copy('nooutputbyt1', plant.record('nooutputbyt1', {}, ['outputBytes']))
    plant.copy('wrongtype001', plant.record('wrongtype001', { exitCode: '0' }))
    plant.copy('baddate00001', plant.record('baddate00001', { endedAt: 'yesterday' }))
    plant.copy('schemav20001', plant.record('schemav20001', { schemaVersion: 2 }))
    plant.copy('recordisdir1', null)
    mkdirSync(join(spool, 'recordisdir1', 'task.json', 'inside'), { recursive: true })
    // A link to a good record is still not read: the daemon may run as root.
    plant.copy('symlinkrec01', null)
    symlinkSync(join(spool, good[2]!.task.id, 'task.json'), join(spool, 'symlinkrec01', 'task.json'))
    writeFileSync(join(spool, 'fileentry001'), 'not a folder\n')
    plant.copy('norecord0001', null)
    plant.copy('otherid00001', plant.record(good[1]!.task.id))
    // A low quota that every entry fits (each counts every file in its folder but its record, by
    // blocks: its output, 4 KiB here, 8 KiB for the 5000 bytes, and its exit.json, 4 KiB; and 1 KiB
    // for the record): 144 KiB in all. A size that is not a number must not make it delete anything.
    daemon = await startTestDaemon({ home, env: { TEND_SPOOL_QUOTA: `${QUOTA_KIB}k` } })
  })

  afterAll(async () => {
    try {
      await daemon?.stop()
    } finally {
      if (home) removeHome(home)
    }
  })

  test('the daemon starts and lists every bad entry as corrupt, with a reason naming the problem', async () => {
    const tasks = await daemon!.client.list({ all: true })
    for (const { id, reason } of planted) {
      const entry = tasks.find((task) => task.id === id)
      expect(entry, `${id} is listed`).toBeDefined()
      expect(entry).toMatchObject({
        id,
        state: 'corrupt',
        spool: join(home, 'spool', id),
        exitCode: null,
        signal: null,
        pid: null,
        startedAt: null,
        endedAt: null,
      })
      expect(entry!.reason, `the reason of ${id}`).toMatch(reason)
      expect(Number.isNaN(Date.parse(entry!.createdAt)), `${id} has a date`).toBe(false)
    }
    // What could be salvaged is kept: the owner when it is one, else "unknown".
    expect(tasks.find((task) => task.id === 'bogusstate01')!.owner).toBe('agent-1')
    expect(tasks.find((task) => task.id === 'emptyobject1')!.owner).toBe('unknown')
    // Without --all only running and queued tasks are listed: corrupt ones are not among them.
    expect(await daemon!.client.list()).toEqual([])
  })

  test('every good task is listed unchanged, with its output intact', async () => {
    const tasks = await daemon!.client.list({ all: true })
    expect(tasks.length).toBe(good.length + planted.length)
    for (const { task, output } of good) {
      expect(tasks.find((each) => each.id === task.id)).toEqual(task)
      expect((await daemon!.client.read(task.id)).data).toBe(output)
    }
    expect(good[2]!.task.outputBytes).toBe(5000)
  })

  test('the spool quota does not delete a good task because of a bad size', async () => {
    for (const { task } of good) expect(existsSync(join(task.spool, 'task.json')), `${task.id} is kept`).toBe(true)
    const status = await daemon!.client.status()
    expect(Number.isInteger(status.spool.usedBytes)).toBe(true)
    expect(status.spool.usedBytes).toBeLessThanOrEqual(QUOTA_KIB * 1024)
  })

  test('show prints a corrupt entry with its reason, and a good task as before', async () => {
    const corrupt = await daemon!.client.get('nocreatedat1')
    expect(corrupt).toMatchObject({ state: 'corrupt', reason: 'task.json invalid: /createdAt is required', owner: 'operator' })
    const shown = await runCli(['show', 'nocreatedat1'], daemon!.env)
    expect(shown.exitCode).toBe(0)
    expect(shown.stdout).toMatch(/^state: +corrupt$/m)
    expect(shown.stdout).toMatch(/^reason: +task\.json invalid: \/createdAt is required$/m)
    expect(shown.stdout).toContain(join(home, 'spool', 'nocreatedat1'))
    const json = await runCli(['show', 'fileentry001', '--json'], daemon!.env)
    expect(JSON.parse(json.stdout)).toMatchObject({ id: 'fileentry001', state: 'corrupt', reason: 'the spool entry is a file, not a folder' })
    const goodShown = await runCli(['show', good[1]!.task.id], daemon!.env)
    expect(goodShown.exitCode).toBe(0)
    expect(goodShown.stdout).toMatch(/^state: +exited\(3\)$/m)
  })

  test('ps --all shows each corrupt entry with its state and reason', async () => {
    const listed = await runCli(['ps', '--all', '--json'], daemon!.env)
    expect(listed.exitCode).toBe(0)
    const tasks = JSON.parse(listed.stdout) as Task[]
    expect(
      tasks
        .filter((task) => task.state === 'corrupt')
        .map((task) => task.id)
        .sort(),
    ).toEqual(planted.map((entry) => entry.id).sort())
    const table = await runCli(['ps', '--all'], daemon!.env)
    expect(table.exitCode).toBe(0)
    const line = table.stdout.split('\n').find((row) => row.startsWith('nooutputbyt1'))
    expect(line).toMatch(/^nooutputbyt1 +corrupt .*\[corrupt: task\.json invalid: \/outputBytes is required\]$/)
  })

  test('an owner sees only the corrupt entries that name it as owner', async () => {
    const agent = new TendClient({ home, autoStart: false, owner: 'agent-1' })
    try {
      expect((await agent.list({ all: true })).map((task) => task.id)).toEqual(['bogusstate01'])
      const error = await agent.get('nocreatedat1').catch((caught: unknown) => caught)
      expect(isTendError(error, 'TEND_ERR_TASK_NOT_FOUND')).toBe(true)
      const refused = await agent.remove('emptyobject1').catch((caught: unknown) => caught)
      expect(isTendError(refused, 'TEND_ERR_TASK_NOT_FOUND')).toBe(true)
      expect(existsSync(join(home, 'spool', 'emptyobject1'))).toBe(true)
    } finally {
      agent.close()
    }
  })

  test('rm removes a corrupt entry: its folder (or the file in its place) is gone', async () => {
    const removed = await runCli(['rm', 'truncated001', 'fileentry001'], daemon!.env)
    expect(removed.stderr).toBe('')
    expect(removed.exitCode).toBe(0)
    expect(existsSync(join(home, 'spool', 'truncated001'))).toBe(false)
    expect(existsSync(join(home, 'spool', 'fileentry001'))).toBe(false)
    const error = await daemon!.client.get('truncated001').catch((caught: unknown) => caught)
    expect(isTendError(error, 'TEND_ERR_TASK_NOT_FOUND')).toBe(true)
  })

  test('gc removes every corrupt entry whatever its age, and no good task', async () => {
    const collected = await runCli(['gc', '--older-than', '1d', '--json'], daemon!.env)
    expect(collected.exitCode).toBe(0)
    const left = planted.map((entry) => entry.id).filter((id) => id !== 'truncated001' && id !== 'fileentry001')
    expect((JSON.parse(collected.stdout) as { removed: string[] }).removed.sort()).toEqual(left.sort())
    for (const id of left) expect(existsSync(join(home, 'spool', id)), `${id} is gone`).toBe(false)
    const tasks = await daemon!.client.list({ all: true })
    expect(tasks).toEqual(good.map((each) => each.task))
    for (const { task, output } of good) expect(readFileSync(join(task.spool, 'output.log'), 'utf8')).toBe(output)
  })
})

describe('a record without outputBytes and the spool quota', () => {
  let home = ''
  let daemon: TestDaemon | undefined

  afterAll(async () => {
    try {
      await daemon?.stop()
    } finally {
      if (home) removeHome(home)
    }
  })

  test('the quota never deletes the finished tasks because one size is missing', async () => {
    home = createTempHome()
    const good = await runGoodTasks(home)
    const plant = createPlanter(home, good[0]!.task)
    plant.copy('nooutputbyt1', plant.record('nooutputbyt1', {}, ['outputBytes']))
    daemon = await startTestDaemon({ home, env: { TEND_SPOOL_QUOTA: '1M' } })
    // The quota is enforced before the daemon answers: by now it has had its chance.
    for (const { task } of good) expect(existsSync(task.spool), `${task.id} is kept`).toBe(true)
    expect((await daemon.client.list({ all: true })).filter((task) => task.state !== 'corrupt')).toEqual(good.map((each) => each.task))
  })
})

/**
 * The store as the spool cleanup uses it, over a fixed set of tasks: the tests below give it sizes
 * no validated record can hold.
 */
function fakeStore(tasks: Task[]): CleanupStore {
  const byId = new Map(tasks.map((task) => [task.id, task]))
  return {
    list: () => [...byId.values()],
    get: (id: string) => byId.get(id)!,
    find: (id: string) => byId.get(id),
    forget: (id: string) => void byId.delete(id),
    roomFreed: () => undefined,
  } as unknown as CleanupStore
}

/** What a file takes on disk (its allocated blocks), as the quota counts it. */
function diskBytes(path: string): number {
  return lstatSync(path).blocks * 512
}

/** A finished task of `bytes` output with its folder on disk (a record and an output.log). */
function plantFinished(spool: string, id: string, second: number, bytes: number): Task {
  const at = (offset: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, second + offset)).toISOString()
  const task: Task = {
    id,
    name: null,
    owner: 'operator',
    command: ['true'],
    shell: false,
    cwd: '/',
    envKeys: [],
    timeoutMs: null,
    maxOutputBytes: 1024,
    outputBytes: bytes,
    lifetime: 'owner',
    sandbox: 'off',
    network: 'host',
    writablePaths: [],
    memoryBytes: null,
    pidsMax: null,
    createdAt: at(0),
    spool: join(spool, id),
    state: 'exited',
    startedAt: at(0),
    pid: 1,
    endedAt: at(1),
    exitCode: 0,
    signal: null,
    reason: null,
    stoppedBy: null,
  }
  mkdirSync(task.spool, { recursive: true })
  writeFileSync(join(task.spool, 'task.json'), JSON.stringify({ schemaVersion: 1, ...task }))
  writeFileSync(join(task.spool, 'output.log'), Buffer.alloc(bytes, 0x61))
  return task
}

describe('quota arithmetic', () => {
  // A spool of its own for each test: every entry in a spool counts, so one test's folders, no
  // task of the next test's store, would count (and go) as strays there.
  let spool = ''
  const spools: string[] = []
  beforeEach(() => {
    spool = join(createTempHome(), 'spool')
    spools.push(spool)
  })
  afterAll(() => {
    for (const each of spools) rmSync(dirname(each), { recursive: true, force: true })
  })

  test('a size a record states, finite or not, plays no part: the quota counts what the outputs take on disk', async () => {
    const ids = ['aaaaaaaaaaa1', 'aaaaaaaaaaa2', 'aaaaaaaaaaa3', 'aaaaaaaaaaa4']
    const tasks = ids.map((id, index) => plantFinished(spool, id, index * 10, 10))
    // Sizes no record can hold since records are validated, but arithmetic must not trust that.
    tasks[1] = { ...tasks[1]!, outputBytes: Number.NaN }
    tasks[2] = { ...tasks[2]!, outputBytes: Number.POSITIVE_INFINITY }
    tasks[3] = { ...tasks[3]!, outputBytes: -5 }
    const cleanup = new SpoolCleanup(spool, 64 * 1024, fakeStore(tasks), new CorruptEntries(), pino({ level: 'silent' }))
    expect(cleanup.usedBytes()).toBe(ids.reduce((sum, id) => sum + diskBytes(join(spool, id, 'output.log')) + 1024, 0))
    expect(await cleanup.enforceQuota()).toEqual([])
    for (const id of ids) expect(existsSync(join(spool, id, 'task.json')), `${id} is kept`).toBe(true)
  })

  test('past the quota corrupt entries are deleted before any finished task', async () => {
    const good = plantFinished(spool, 'goodtask0001', 0, 10)
    // 70 KiB of output beside a record that is not JSON: over the 64 KiB quota by itself.
    mkdirSync(join(spool, 'corrupt00001'))
    writeFileSync(join(spool, 'corrupt00001', 'output.log'), Buffer.alloc(70 * 1024, 0x61))
    writeFileSync(join(spool, 'corrupt00001', 'task.json'), '{"schemaVersion": 1, "id": "corr')
    const entry = await readSpoolEntry(spool, 'corrupt00001')
    expect(entry.corrupt).toMatchObject({ state: 'corrupt', outputBytes: 70 * 1024 })
    const corrupt = new CorruptEntries()
    corrupt.add(entry.corrupt!)
    const cleanup = new SpoolCleanup(spool, 64 * 1024, fakeStore([good]), corrupt, pino({ level: 'silent' }))
    expect(cleanup.usedBytes()).toBe(diskBytes(join(spool, 'corrupt00001', 'output.log')) + diskBytes(join(good.spool, 'output.log')) + 2 * 1024)
    expect(await cleanup.enforceQuota()).toEqual(['corrupt00001'])
    expect(existsSync(join(spool, 'corrupt00001'))).toBe(false)
    expect(corrupt.find('corrupt00001')).toBeUndefined()
    expect(existsSync(join(good.spool, 'task.json'))).toBe(true)
  })
})

describe('a daemon that is not root', () => {
  test('a folder it cannot read is listed as corrupt with EACCES, and rm removes it', async () => {
    const user = checkUnprivilegedUser()
    const home = createTempHome()
    const folder = join(home, 'spool', 'noaccess0001')
    mkdirSync(folder, { recursive: true })
    writeFileSync(join(folder, 'task.json'), '{}\n')
    for (const path of [join(home, 'spool'), folder, join(folder, 'task.json')]) chownSync(path, user.uid, user.gid)
    chmodSync(folder, 0o000)
    let daemon: TestDaemon | undefined
    try {
      daemon = await startTestDaemon({ home, user: 'unprivileged' })
      const entry = await daemon.client.get('noaccess0001')
      expect(entry).toMatchObject({ state: 'corrupt', reason: 'task.json cannot be read: EACCES: permission denied', owner: 'unknown', outputBytes: 0 })
      expect(await daemon.client.remove('noaccess0001')).toMatchObject({ removed: 'noaccess0001' })
      expect(existsSync(folder)).toBe(false)
    } finally {
      if (daemon) await daemon.stop()
      else removeHome(home)
    }
  })
})
