import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { randomInt } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import { chownSync, linkSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { cachedKnownHomes } from '../../daemon/store/home-registry.js'
import { cachedSharedRegistries } from '../../daemon/store/registry-folders.js'
import { markHome } from '../../daemon/store/home-marker.js'
import { eachSandboxedProfile } from '../helpers/profiles.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { checkUnprivilegedUser, startTestDaemon, stopAll, type TestDaemon, type UnprivilegedUser } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * A user without a home of its own (no passwd entry, or /nonexistent) keeps its registry of tend
 * homes in /var/tmp, where any other user can make a folder first. Such a folder must not keep
 * that user's daemons from starting, nor from finding each other's homes.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

describe('the registry of tend homes, squatted by another user', () => {
  /** A uid no user database entry names: its registry can only be in /var/tmp. */
  let user: UnprivilegedUser
  let squatted: string
  /** Homes and cwd in /var/tmp: a sandboxed task has a /tmp of its own. */
  let base: string
  const daemons: TestDaemon[] = []
  const taskIds: string[] = []

  beforeAll(() => {
    for (;;) {
      const uid = randomInt(3_600_000, 3_700_000)
      if (spawnSync('getent', ['passwd', String(uid)]).status === 2 && spawnSync('getent', ['group', String(uid)]).status === 2) {
        user = { name: `tend-noname-${uid}`, uid, gid: uid }
        break
      }
    }
    squatted = `/var/tmp/tend-homes-${user.uid}`
    base = `/var/tmp/tend-registry-${process.pid}-${user.uid}`
    mkdirSync(base, { mode: 0o711 })
    // Another local user was there first, with a folder only it may enter.
    const squatter = checkUnprivilegedUser()
    mkdirSync(squatted, { mode: 0o700 })
    chownSync(squatted, squatter.uid, squatter.gid)
  })

  afterAll(async () => {
    try {
      await waitFor('no process of any task of this file left', () =>
        taskIds.every((id) => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0),
      )
    } finally {
      await stopAll(...daemons)
      rmSync(base, { recursive: true, force: true })
      for (const name of readdirSync('/var/tmp'))
        if (name === `tend-homes-${user.uid}` || name.startsWith(`tend-homes-${user.uid}.`)) rmSync(join('/var/tmp', name), { recursive: true, force: true })
    }
  })

  test("the user's daemons start all the same, say where their registry is, and still hide each other's homes", async () => {
    const home = (name: string) => {
      const path = join(base, name)
      mkdirSync(path, { mode: 0o700 })
      return path
    }
    const first = await startTestDaemon({ user, home: home('first'), env: { PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace' } })
    daemons.push(first)
    // Never silent: the daemon's log names the folder it could not use.
    expect(readFileSync(join(first.home, 'daemon.log'), 'utf8')).toContain(squatted)
    // The squatter's folder is as it was: the registry is another folder, the user's own.
    expect(lstatSync(squatted).uid).not.toBe(user.uid)
    const own = readdirSync('/var/tmp').filter((name) => name.startsWith(`tend-homes-${user.uid}.`) && lstatSync(join('/var/tmp', name)).uid === user.uid)
    expect(own).toHaveLength(1)
    const second = await startTestDaemon({ user, home: home('second'), env: { PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace' } })
    daemons.push(second)
    const cwd = home('ws')
    chownSync(cwd, user.uid, user.gid)
    // A task of the second daemon (on the user's own uid) sees the first one's home empty.
    const started = await second.client.start({
      command: `ls -A ${first.home} | sed 's/^/listed: /'; echo done`,
      shell: true,
      cwd,
      sandbox: 'workspace',
      timeoutMs: 20_000,
    })
    taskIds.push(started.id)
    const task = await second.client.wait(started.id, { timeoutMs: 40_000 })
    const output = (await second.client.read(started.id)).data
    expect(output, task.reason ?? '').toContain('done\n')
    expect(output).not.toMatch(/listed: /)
    // Both daemons keep to the one registry the first made.
    expect(readdirSync('/var/tmp').filter((name) => name.startsWith(`tend-homes-${user.uid}.`))).toEqual(own)
  })
})

describe('registries another user fills to slow every admission', () => {
  /** A uid no user database entry names: a root daemon reads its registries in /var/tmp all the same. */
  let uid: number
  let daemon: TestDaemon
  const folders: string[] = []
  const taskIds: string[] = []
  let base: string
  let toucher: NodeJS.Timeout | undefined

  beforeAll(async () => {
    for (;;) {
      uid = randomInt(3_700_000, 3_800_000)
      if (spawnSync('getent', ['passwd', String(uid)]).status === 2) break
    }
    base = `/var/tmp/tend-registry-cost-${process.pid}-${uid}`
    mkdirSync(base, { mode: 0o711 })
    mkdirSync(join(base, 'ws'), { mode: 0o755 })
    mkdirSync(join(base, 'home'), { mode: 0o700 })
    daemon = await startTestDaemon({ home: join(base, 'home'), env: { PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace' } })
  })

  afterAll(async () => {
    if (toucher) clearInterval(toucher)
    try {
      await waitFor('no process of any task of this file left', () =>
        taskIds.every((id) => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0),
      )
    } finally {
      await stopAll(daemon)
      for (const folder of folders) rmSync(folder, { recursive: true, force: true })
      rmSync(base, { recursive: true, force: true })
    }
  })

  /** What the daemon process has read so far (every read syscall, every thread), as the kernel counts it. */
  function bytesReadByDaemon(): number {
    const io = readFileSync(`/proc/${daemon.process.pid}/io`, 'utf8')
    return Number(/^rchar: (\d+)$/m.exec(io)![1])
  }

  eachSandboxedProfile(
    'folders of 1024 hard links to a 60 KiB entry each, their mtime in the future and kept changing, cost an admission next to nothing',
    () => daemon.client,
    async (sandbox) => {
      if (folders.length === 0) {
        // Planted as that uid would: its own folders in /var/tmp, an entry far larger than a real one, linked over and over.
        const entry = join(base, 'entry.json')
        writeFileSync(entry, `{"home":"/var/tmp","pid":1,"pad":"${'x'.repeat(60 * 1024)}"}`)
        chownSync(entry, uid, uid)
        for (const name of [`tend-homes-${uid}`, `tend-homes-${uid}.adv1`]) {
          const folder = join('/var/tmp', name)
          mkdirSync(folder, { mode: 0o755 })
          folders.push(folder)
          for (let index = 0; index < 1024; index++) linkSync(entry, join(folder, `${index}.json`))
          chownSync(folder, uid, uid)
        }
        // touch -d 2030, again and again: an mtime that never looks settled, and a ctime that never is.
        const future = new Date('2030-01-01T00:00:00Z')
        const touch = () => {
          for (const folder of folders) utimesSync(folder, future, future)
        }
        touch()
        toucher = setInterval(touch, 100)
      }
      const before = bytesReadByDaemon()
      for (let round = 0; round < 5; round++) {
        const started = await daemon.client.start({ command: ['true'], cwd: join(base, 'ws'), sandbox, timeoutMs: 20_000 })
        taskIds.push(started.id)
        const task = await daemon.client.wait(started.id, { timeoutMs: 40_000 })
        expect(task.exitCode, task.reason ?? '').toBe(0)
      }
      const read = bytesReadByDaemon() - before
      // Whole, the planted entries are 120 MiB at every look (2.5 GB for these five tasks); a bounded
      // registry refuses each on its size before reading it (about 140 KiB were read in all here).
      expect(read, `the daemon read ${read} bytes for five tasks`).toBeLessThan(1024 * 1024)
    },
  )
})

describe('a /var/tmp that another user fills with names and changes all the time', () => {
  let parent: string
  beforeAll(() => {
    parent = mkdtempSync('/var/tmp/tend-shared-names-')
  })
  afterAll(() => {
    rmSync(parent, { recursive: true, force: true })
  })

  /** A folder standing for /var/tmp with `count` names, and tend-homes-0 (root's registry) in it. */
  function fill(dir: string, count: number): void {
    mkdirSync(dir)
    for (let index = 0; index < count; index++) writeFileSync(join(dir, `name-${index}`), '')
    mkdirSync(join(dir, 'tend-homes-0'))
  }

  test('past 4096 names it is listed again at most once a second: a change is seen after that second, not at every admission', () => {
    const dir = join(parent, 'many')
    fill(dir, 5000)
    // A clock well past the folder's last change, so that its ctime counts as settled.
    let clock = Date.now() + 10_000
    const registries = cachedSharedRegistries(dir, () => clock)
    expect(registries().get(0)).toEqual([join(dir, 'tend-homes-0')])
    mkdirSync(join(dir, 'tend-homes-0.other'))
    clock += 10
    // Changed, but listed less than a second ago: the last listing stands.
    expect(registries().get(0)).toEqual([join(dir, 'tend-homes-0')])
    clock += 1000
    expect(registries().get(0)).toEqual([join(dir, 'tend-homes-0'), join(dir, 'tend-homes-0.other')])
  })

  test('up to 4096 names it is listed again whenever it changed', () => {
    const dir = join(parent, 'few')
    fill(dir, 100)
    let clock = Date.now() + 10_000
    const registries = cachedSharedRegistries(dir, () => clock)
    expect(registries().get(0)).toEqual([join(dir, 'tend-homes-0')])
    mkdirSync(join(dir, 'tend-homes-0.other'))
    clock += 10
    expect(registries().get(0)).toEqual([join(dir, 'tend-homes-0'), join(dir, 'tend-homes-0.other')])
  })
})

describe('a registry folder whose mtime lies in the future', () => {
  let base: string

  beforeAll(() => {
    base = mkdtempSync('/var/tmp/tend-registry-future-')
  })

  afterAll(() => {
    rmSync(base, { recursive: true, force: true })
  })

  test('is read again only when its folder changes, not at every call', async () => {
    const registry = join(base, 'registry')
    mkdirSync(registry, { mode: 0o700 })
    const homes = ['one', 'two'].map((name) => {
      const home = join(base, name)
      mkdirSync(home, { mode: 0o700 })
      markHome(home)
      return home
    })
    const entry = join(registry, 'entry.json')
    writeFileSync(entry, JSON.stringify({ home: homes[0], pid: 1 }))
    const future = new Date('2030-01-01T00:00:00Z')
    utimesSync(registry, future, future)
    const read = cachedKnownHomes(() => [registry], false)
    // Settled: nothing changed the folder for longer than the reader waits for a coarse clock.
    await waitFor('the registry folder unchanged for over a second', () => Date.now() - statSync(registry).ctimeMs > 1500, 5000)
    expect(read()).toEqual([homes[0]])
    // Rewritten in place (a registry's entries are replaced by a rename, which changes the folder): not seen, so not read.
    writeFileSync(entry, JSON.stringify({ home: homes[1], pid: 1 }))
    expect(read()).toEqual([homes[0]])
    // A change of the folder is seen at once.
    writeFileSync(join(registry, 'other.json'), JSON.stringify({ home: homes[1], pid: 1 }))
    expect(read()).toEqual([homes[1]])
  })
})
