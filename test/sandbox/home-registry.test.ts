import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { randomInt } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import { chownSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
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
      await waitFor('no process of any task of this file left', () => taskIds.every((id) => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0))
    } finally {
      await stopAll(...daemons)
      rmSync(base, { recursive: true, force: true })
      for (const name of readdirSync('/var/tmp')) if (name === `tend-homes-${user.uid}` || name.startsWith(`tend-homes-${user.uid}.`)) rmSync(join('/var/tmp', name), { recursive: true, force: true })
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
    const started = await second.client.start({ command: `ls -A ${first.home} | sed 's/^/listed: /'; echo done`, shell: true, cwd, sandbox: 'workspace', timeoutMs: 20_000 })
    taskIds.push(started.id)
    const task = await second.client.wait(started.id, { timeoutMs: 40_000 })
    const output = (await second.client.read(started.id)).data
    expect(output, task.reason ?? '').toContain('done\n')
    expect(output).not.toMatch(/listed: /)
    // Both daemons keep to the one registry the first made.
    expect(readdirSync('/var/tmp').filter((name) => name.startsWith(`tend-homes-${user.uid}.`))).toEqual(own)
  })
})
