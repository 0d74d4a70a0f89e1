import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { TendClient } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { daemonPerFile, expectTendError } from '../helpers/daemon-per-file.js'
import { createTempHome, daemonEnv, startTestDaemon, stopKeepingHome } from '../helpers/test-daemon.js'

/*
 * A task is named on the command line by its id, its name (the newest task of that name the caller
 * may see) or a unique prefix of its id of 4 or more characters: exact id first, then name, then
 * prefix. The daemon resolves (GET /v1/tasks/resolve), owner-scoped like every route.
 */

const shared = daemonPerFile('refs')

function cli(...args: string[]) {
  return runCli(args, daemonEnv(shared.daemon.home))
}

/** A finished task of this name (or none), owned by `owner`. */
async function finishedTask(client: TendClient, name: string | undefined, line = 'echo hi', owner?: string) {
  const task = await client.start({ command: line, shell: true, cwd: shared.workspace, sandbox: 'off', name, owner })
  shared.track(task.id)
  return client.wait(task.id)
}

describe('task references', () => {
  test('a name resolves to the newest task of that name, and every verb takes it', async () => {
    const { client } = shared.daemon
    const older = await finishedTask(client, 'refs-build', 'echo older')
    const newer = await finishedTask(client, 'refs-build', 'echo newer')
    expect(await client.resolve('refs-build')).toBe(newer.id)
    expect(older.id).not.toBe(newer.id)

    const logs = await cli('logs', 'refs-build')
    expect(logs.stdout).toBe('newer\n')
    const shown = await cli('--json', 'show', 'refs-build')
    expect(JSON.parse(shown.stdout).id).toBe(newer.id)
    const waited = await cli('wait', 'refs-build')
    expect(waited.exitCode).toBe(0)

    const sleeper = await client.start({ command: 'sleep 30', shell: true, cwd: shared.workspace, sandbox: 'off', name: 'refs-sleeper' })
    shared.track(sleeper.id)
    const killed = await cli('kill', 'refs-sleeper')
    expect(killed.exitCode, killed.stderr).toBe(0)
    expect((await client.get(sleeper.id)).state).toBe('killed')

    const removed = await cli('rm', 'refs-build')
    expect(removed.exitCode, removed.stderr).toBe(0)
    await expectTendError(client.get(newer.id), 'TEND_ERR_TASK_NOT_FOUND')
    // Once the newest is gone, the name is the older one's.
    expect(await client.resolve('refs-build')).toBe(older.id)
  })

  test('a unique prefix of 4 or more characters resolves to its task; a shorter one or an unknown ref is not found, naming it', async () => {
    const { client } = shared.daemon
    const task = await finishedTask(client, undefined, 'echo by-prefix')
    expect(await client.resolve(task.id)).toBe(task.id)
    expect(await client.resolve(task.id.slice(0, 8))).toBe(task.id)
    const logs = await cli('logs', task.id.slice(0, 10))
    expect(logs.stdout).toBe('by-prefix\n')
    await expectTendError(client.resolve(task.id.slice(0, 3)), 'TEND_ERR_TASK_NOT_FOUND', new RegExp(`: ${task.id.slice(0, 3)}$`))
    await expectTendError(client.resolve('refs-no-such-task'), 'TEND_ERR_TASK_NOT_FOUND', /refs-no-such-task/)
    const shown = await cli('show', 'refs-no-such-task')
    expect(shown.exitCode).not.toBe(0)
    expect(shown.stderr).toMatch(/task not found: refs-no-such-task/)
  })

  test('a name wins over an id prefix it also is', async () => {
    const { client } = shared.daemon
    const target = await finishedTask(client, undefined, 'true')
    const named = await finishedTask(client, target.id.slice(0, 6), 'true')
    expect(await client.resolve(target.id.slice(0, 6))).toBe(named.id)
    expect(await client.resolve(target.id.slice(0, 7))).toBe(target.id)
  })

  test("an owner resolves only among its own tasks: another owner's name or prefix is not found", async () => {
    const { client } = shared.daemon
    const theirs = await finishedTask(client, 'refs-theirs', 'true', 'refs-other')
    const mine = new TendClient({ home: shared.daemon.home, owner: 'refs-me', autoStart: false })
    try {
      await expectTendError(mine.resolve('refs-theirs'), 'TEND_ERR_TASK_NOT_FOUND')
      await expectTendError(mine.resolve(theirs.id.slice(0, 8)), 'TEND_ERR_TASK_NOT_FOUND')
      await expectTendError(mine.resolve(theirs.id), 'TEND_ERR_TASK_NOT_FOUND')
      expect(await client.resolve('refs-theirs')).toBe(theirs.id)
    } finally {
      mine.close()
    }
  })
})

describe('an ambiguous prefix', () => {
  test('is refused with the candidates: id, name, state and age', async () => {
    const home = createTempHome()
    let daemon = await startTestDaemon({ home })
    try {
      const task = await daemon.client.start({ command: 'true', shell: true, cwd: '/', sandbox: 'off', name: 'refs-twin' })
      await daemon.client.wait(task.id)
      await stopKeepingHome(daemon)
      // Random ids seldom share 4 characters: a second record is made beside the first, with an id that does.
      const twin = task.id.slice(0, 4) + (task.id[4] === 'z' ? 'y' : 'z').repeat(8)
      const spool = join(home, 'spool')
      cpSync(join(spool, task.id), join(spool, twin), { recursive: true })
      const record = JSON.parse(readFileSync(join(spool, twin, 'task.json'), 'utf8'))
      writeFileSync(join(spool, twin, 'task.json'), JSON.stringify({ ...record, id: twin, name: null, spool: join(spool, twin), run: `${twin}.copy` }))
      daemon = await startTestDaemon({ home })
      expect((await daemon.client.get(twin)).state).toBe('exited')

      await expectTendError(daemon.client.resolve(task.id.slice(0, 4)), 'TEND_ERR_TASK_AMBIGUOUS')
      const shown = await runCli(['show', task.id.slice(0, 4)], daemonEnv(home))
      expect(shown.exitCode).not.toBe(0)
      expect(shown.stderr).toMatch(/ambiguous task reference/)
      expect(shown.stderr).toContain(`${task.id} ("refs-twin", exited, `)
      expect(shown.stderr).toContain(`${twin} (no name, exited, `)
      expect(shown.stderr).toMatch(/ ago\)/)
      // One more character tells them apart.
      expect(await daemon.client.resolve(task.id.slice(0, 5))).toBe(task.id)
      expect(await daemon.client.resolve(twin.slice(0, 5))).toBe(twin)
    } finally {
      await daemon.stop()
      rmSync(home, { recursive: true, force: true })
    }
  })
})
