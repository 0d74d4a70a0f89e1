import { afterAll, describe, expect, test } from 'vitest'
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pino } from 'pino'
import type { Task } from '../../protocol/index.js'
import { daemonPerFile } from '../helpers/daemon-per-file.js'
import { createTempHome, startTestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { CorruptEntries } from '../../daemon/store/corrupt-entries.js'
import { SpoolCleanup, STRAY_GRACE_MS } from '../../daemon/store/spool-cleanup.js'
import { spoolFolders } from '../../spool/index.js'

/*
 * Issue 25, round 2, findings F3 and F13: a task under `off` (root, for a root daemon) replaces its
 * own spool folder, or the spool itself, with a symbolic link or another folder; or puts content
 * in the spool where no task's folder counts it.
 */

const shared = daemonPerFile('spool-folders')
const spoolOf = () => join(shared.daemon.home, 'spool')
const victims: string[] = []
afterAll(() => {
  for (const dir of victims) rmSync(dir, { recursive: true, force: true })
})

/** A folder outside the home that no task may reach through tend. */
function victimFolder(): string {
  const dir = mkdtempSync('/var/tmp/tend-spool-folders-victim-')
  victims.push(dir)
  return dir
}

/** Runs a finished task of `owner` printing `text`; answers it once ended. */
async function finishedTask(owner: string, text: string): Promise<Task> {
  const task = await shared.daemon.client.start({ command: ['echo', text], owner, sandbox: 'off', cwd: shared.workspace })
  shared.track(task.id)
  const ended = await shared.daemon.client.wait(task.id, { timeoutMs: 20_000 })
  expect(ended.state).toBe('exited')
  return ended
}

/** A task of `owner` under `off` running `line` after its folder's name is known; answers it once it has ended (or its ending is held). */
async function hostileTask(owner: string, line: string, go: string): Promise<Task> {
  const task = await shared.daemon.client.start({
    command: `while [ ! -e ${go} ]; do sleep 0.02; done; ${line}`,
    shell: true,
    owner,
    sandbox: 'off',
    cwd: shared.workspace,
  })
  shared.track(task.id)
  mkdirSync(go)
  return waitFor(
    `task ${task.id} to end`,
    async () => {
      const now = await shared.daemon.client.get(task.id)
      return now.state === 'running' || now.state === 'queued' ? null : now
    },
    20_000,
  )
}

describe('F3: a task folder replaced by a symbolic link', () => {
  test("a link to another owner's folder: its output is never read and its record never written", async () => {
    const alice = await finishedTask('alice', 'alice-secret')
    const before = readFileSync(join(spoolOf(), alice.id, 'task.json'), 'utf8')
    const go = join(shared.workspace, 'go-link-other')
    const mallory = await hostileTask('mallory', `cd "$TEND_HOME/spool"; mv $TEND_TASK_ID $TEND_TASK_ID.moved; ln -s ${alice.id} $TEND_TASK_ID; exit 7`, go)
    // Whatever the daemon answers for mallory's output, alice's bytes are not in it.
    const read = await shared.daemon.client.read(mallory.id).then(
      (result) => result.data,
      (error: Error) => error.message,
    )
    expect(read).not.toContain('alice-secret')
    expect(readFileSync(join(spoolOf(), alice.id, 'task.json'), 'utf8')).toBe(before)
    expect((await shared.daemon.client.get(alice.id)).owner).toBe('alice')
  })

  test('a link to a folder outside the home: nothing is written there', async () => {
    const victim = victimFolder()
    const go = join(shared.workspace, 'go-link-outside')
    const mallory = await hostileTask('mallory', `cd "$TEND_HOME/spool"; mv $TEND_TASK_ID $TEND_TASK_ID.moved; ln -s ${victim} $TEND_TASK_ID; exit 7`, go)
    expect(mallory.id).toBeTruthy()
    // Its ending was recorded (or held) by now: a write through the link would have landed.
    expect(readdirSync(victim)).toEqual([])
  })

  test('the spool replaced by a link: a new task is made in the real spool, nothing in the link target', async () => {
    const victim = victimFolder()
    const go = join(shared.workspace, 'go-spool-link')
    await hostileTask('mallory', `cd "$TEND_HOME"; mv spool spool.real; ln -s ${victim} spool; exit 0`, go)
    try {
      const alice = await shared.daemon.client.start({ command: ['echo', 'alice-next'], owner: 'alice', sandbox: 'off', cwd: shared.workspace })
      shared.track(alice.id)
      const ended = await shared.daemon.client.wait(alice.id, { timeoutMs: 20_000 })
      expect(readdirSync(victim)).toEqual([])
      expect(existsSync(join(shared.daemon.home, 'spool.real', alice.id, 'task.json'))).toBe(true)
      expect(ended.state === 'exited' || ended.state === 'failed').toBe(true)
    } finally {
      rmSync(join(shared.daemon.home, 'spool'))
      const { renameSync } = await import('node:fs')
      renameSync(join(shared.daemon.home, 'spool.real'), join(shared.daemon.home, 'spool'))
    }
  })
})

describe("F3: input to a task whose folder is a link to another owner's", () => {
  test("neither the other task's stdin nor its input.log gets the bytes", async () => {
    const client = shared.daemon.client
    const alice = await client.start({ command: `cat; echo alice-done`, shell: true, owner: 'alice', sandbox: 'off', cwd: shared.workspace, stdin: 'pipe' })
    shared.track(alice.id)
    const swapped = spoolOf()
    const mallory = await client.start({
      command: `cd "$TEND_HOME/spool"; mv $TEND_TASK_ID $TEND_TASK_ID.moved; ln -s ${alice.id} $TEND_TASK_ID; sleep 30`,
      shell: true,
      owner: 'mallory',
      sandbox: 'off',
      cwd: shared.workspace,
      stdin: 'pipe',
    })
    shared.track(mallory.id)
    await waitFor(
      `task ${mallory.id} to swap its folder for a link`,
      () => existsSync(join(swapped, `${mallory.id}.moved`)) && lstatSync(join(swapped, mallory.id)).isSymbolicLink(),
    )
    await client.input(mallory.id, 'mallory-injected\n').catch((error: Error) => error)
    expect(existsSync(join(spoolOf(), alice.id, 'input.log')) ? readFileSync(join(spoolOf(), alice.id, 'input.log'), 'utf8') : '').not.toContain(
      'mallory-injected',
    )
    await client.input(alice.id, 'alice-own\n', { eof: true })
    const ended = await client.wait(alice.id, { timeoutMs: 20_000 })
    expect(ended.state).toBe('exited')
    const output = (await client.read(alice.id)).data
    expect(output).toContain('alice-own')
    expect(output).not.toContain('mallory-injected')
  })
})

describe('F13: spool content outside any task folder', () => {
  test('a task folder renamed away still counts, is reported, and gc removes it', async () => {
    const go = join(shared.workspace, 'go-renamed')
    const task = await hostileTask(
      'mallory',
      `cd "$TEND_HOME/spool"; head -c 5000000 /dev/urandom > $TEND_TASK_ID/blob; mv $TEND_TASK_ID $TEND_TASK_ID.away; exit 0`,
      go,
    )
    const status = await shared.daemon.client.status()
    expect(status.spool.usedBytes).toBeGreaterThanOrEqual(5_000_000)
    expect(status.spool.strayEntries?.map((entry) => entry.name)).toContain(`${task.id}.away`)
    await shared.daemon.client.gc({ olderThanMs: 3_600_000 })
    expect(existsSync(join(spoolOf(), `${task.id}.away`))).toBe(false)
    expect((await shared.daemon.client.status()).spool.strayEntries?.map((entry) => entry.name) ?? []).not.toContain(`${task.id}.away`)
  })

  test("files in a subfolder of a task's folder count", async () => {
    const before = (await shared.daemon.client.status()).spool.usedBytes
    const go = join(shared.workspace, 'go-subfolder')
    await hostileTask('mallory', `cd "$TEND_HOME/spool/$TEND_TASK_ID"; mkdir -p a/b; head -c 4000000 /dev/urandom > a/b/blob; exit 0`, go)
    expect((await shared.daemon.client.status()).spool.usedBytes - before).toBeGreaterThanOrEqual(4_000_000)
  })
})

/** The store as the spool cleanup uses it, over a fixed set of tasks. */
function fakeStore(tasks: Task[]): ConstructorParameters<typeof SpoolCleanup>[2] {
  const byId = new Map(tasks.map((task) => [task.id, task]))
  return {
    list: () => [...byId.values()],
    get: (id: string) => byId.get(id)!,
    find: (id: string) => byId.get(id),
    forget: (id: string) => void byId.delete(id),
    settled: async () => undefined,
  } as unknown as ConstructorParameters<typeof SpoolCleanup>[2]
}

/** A finished task with a small output, its folder on disk. */
function plantFinished(spool: string, id: string): Task {
  const at = new Date(Date.UTC(2026, 0, 1)).toISOString()
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
    outputBytes: 10,
    lifetime: 'owner',
    sandbox: 'off',
    network: 'host',
    writablePaths: [],
    memoryBytes: null,
    pidsMax: null,
    createdAt: at,
    spool: join(spool, id),
    state: 'exited',
    startedAt: at,
    pid: 1,
    endedAt: at,
    exitCode: 0,
    signal: null,
    reason: null,
    stoppedBy: null,
  }
  mkdirSync(task.spool, { recursive: true })
  writeFileSync(join(task.spool, 'task.json'), JSON.stringify({ schemaVersion: 1, ...task }))
  writeFileSync(join(task.spool, 'output.log'), Buffer.alloc(10, 0x61))
  return task
}

describe('F13: the quota and entries that are no task', () => {
  const homes: string[] = []
  afterAll(() => {
    for (const home of homes) rmSync(home, { recursive: true, force: true })
  })

  test('a stray changed within the grace period (kernel ctime, whatever its mtime says) counts but stays; past it, it goes first; a folder being made is never one', async () => {
    const home = createTempHome()
    homes.push(home)
    const spool = join(home, 'spool')
    const good = plantFinished(spool, 'goodtask0001')
    // A task folder renamed away, 70 KiB in it: over the 64 KiB quota by itself. Its task set its
    // mtime years back; its ctime is now, and no task can set that.
    mkdirSync(join(spool, 'goodtask0002.away'))
    writeFileSync(join(spool, 'goodtask0002.away', 'blob'), Buffer.alloc(70 * 1024, 0x61))
    const past = new Date(Date.UTC(2020, 0, 1))
    utimesSync(join(spool, 'goodtask0002.away'), past, past)
    // A folder the daemon is making for a task not in its store yet.
    const making = spoolFolders(spool).make('newtask00001')
    making.close()
    writeFileSync(join(spool, 'newtask00001', 'output.log'), Buffer.alloc(70 * 1024, 0x61))
    const cleanup = new SpoolCleanup(spool, 64 * 1024, fakeStore([good]), new CorruptEntries(), pino({ level: 'silent' }))
    expect(cleanup.strayEntries().map((entry) => entry.name)).toEqual(['goodtask0002.away'])
    expect(cleanup.usedBytes()).toBeGreaterThanOrEqual(70 * 1024)

    const now = Date.now()
    await cleanup.enforceQuota(now)
    expect(existsSync(join(spool, 'goodtask0002.away', 'blob')), 'a fresh stray is kept').toBe(true)
    expect(existsSync(join(spool, 'newtask00001', 'output.log')), 'a folder being made is kept').toBe(true)

    // The finished task may have gone to make room meanwhile; a new one shows that strays go first.
    const later = plantFinished(spool, 'goodtask0003')
    const cleanupLater = new SpoolCleanup(spool, 64 * 1024, fakeStore([later]), new CorruptEntries(), pino({ level: 'silent' }))
    rmSync(join(spool, 'newtask00001', 'output.log'))
    expect(await cleanupLater.enforceQuota(now + STRAY_GRACE_MS + 1000)).toEqual(['goodtask0002.away'])
    expect(existsSync(join(spool, 'goodtask0002.away'))).toBe(false)
    expect(existsSync(join(later.spool, 'task.json'))).toBe(true)
    expect(existsSync(join(spool, 'newtask00001'))).toBe(true)
  })
})

describe('F3 after a restart', () => {
  test('a task folder that is a link, or a folder holding another task, is a corrupt entry; the other task stays whole', async () => {
    const daemon = await startTestDaemon()
    try {
      const spool = join(daemon.home, 'spool')
      const alice = await daemon.client.start({ command: ['echo', 'alice-secret'], owner: 'alice', sandbox: 'off', cwd: shared.workspace })
      await daemon.client.wait(alice.id, { timeoutMs: 20_000 })
      const mallory = await daemon.client.start({ command: ['true'], owner: 'mallory', sandbox: 'off', cwd: shared.workspace })
      await daemon.client.wait(mallory.id, { timeoutMs: 20_000 })
      await daemon.client.stopDaemon()
      rmSync(join(spool, mallory.id), { recursive: true })
      const { symlinkSync } = await import('node:fs')
      symlinkSync(alice.id, join(spool, mallory.id))
      const again = await startTestDaemon({ home: daemon.home })
      try {
        const seen = await again.client.get(mallory.id)
        expect(seen.state).toBe('corrupt')
        const kept = await again.client.get(alice.id)
        expect(kept.owner).toBe('alice')
        expect(kept.state).toBe('exited')
        await again.client.remove(mallory.id)
        expect(existsSync(join(spool, alice.id, 'output.log'))).toBe(true)
      } finally {
        await again.stop()
      }
    } finally {
      await daemon.crash().catch(() => undefined)
    }
  })
})
