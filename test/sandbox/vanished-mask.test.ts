import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { randomBytes } from 'node:crypto'
import { chownSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { findOnPath } from '../../daemon/sandbox/capabilities.js'
import { checkUnprivilegedUser, startTestDaemon, type TestDaemon, endSuite } from '../helpers/test-daemon.js'

/*
 * A daemon whose masks bubblewrap mounts by path (the node spawner's, whoever runs it, and the
 * native spawner's of a daemon that is not root: only root's children hide by descriptor) decides
 * them on what is there when it plans the task; the owner of a masked place may remove or replace
 * it before bubblewrap mounts over it. The task must start all the same (a place that is gone
 * needs no mask) and still see nothing of what is there when it runs. The race is made
 * deterministic: bubblewrap, on the daemon's PATH, is a wrapper that changes the place right
 * before it runs the real one for a task.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
const BWRAP = findOnPath('bwrap', SYSTEM_PATH)

function q(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`
}

/** What happens to the secret folder (~/.ssh) or file (~/.npmrc) between the plan and bubblewrap. */
const CHANGES: Array<[string, (folder: string, file: string, secret: string) => string]> = [
  ['a secret folder is removed', (folder) => `rm -rf ${q(folder)}`],
  [
    'a secret folder is replaced by another holding a new secret',
    (folder, _file, secret) => `rm -rf ${q(folder)} && mkdir ${q(folder)} && echo ${secret} > ${q(join(folder, 'id'))}`,
  ],
  ['a secret folder is replaced by a file holding a new secret', (folder, _file, secret) => `rm -rf ${q(folder)} && echo ${secret} > ${q(folder)}`],
  ['a secret file is removed', (_folder, file) => `rm -f ${q(file)}`],
  [
    'a secret file is replaced by a folder holding a new secret',
    (_folder, file, secret) => `rm -f ${q(file)} && mkdir ${q(file)} && echo ${secret} > ${q(join(file, 'id'))}`,
  ],
]

describe.each([
  ['node', 'root'],
  ['node', 'non-root'],
  ['native', 'non-root'],
] as const)('places masked by bubblewrap that change as a task starts (%s spawner, daemon as %s)', (spawner, who) => {
  const base = join('/var/tmp', `tend-vanished-${spawner}-${who}-${process.pid}-${randomBytes(4).toString('hex')}`)
  const userHome = join(base, 'home')
  const workspace = join(base, 'ws')
  const bin = join(base, 'bin')
  /** Run once (then renamed) by the wrapper right before bubblewrap sets up a task's sandbox. */
  const hook = join(bin, 'before-setup.sh')
  const folder = join(userHome, '.ssh')
  const file = join(userHome, '.npmrc')
  const first = `first-secret-${randomBytes(6).toString('hex')}`
  let owner: { uid: number; gid: number }
  let daemon: TestDaemon
  const taskIds: string[] = []

  const asOwner = (path: string) => chownSync(path, owner.uid, owner.gid)

  beforeAll(async () => {
    expect(BWRAP, 'bubblewrap is not installed').not.toBeNull()
    owner = who === 'root' ? { uid: 0, gid: 0 } : checkUnprivilegedUser()
    mkdirSync(base, { mode: 0o711 })
    for (const dir of [userHome, workspace, bin]) {
      mkdirSync(dir, { mode: 0o711 })
      asOwner(dir)
    }
    // Tasks (their command line names --args) are the only bubblewrap runs with a change to make.
    writeFileSync(
      join(bin, 'bwrap'),
      `#!/bin/sh\ncase " $* " in *" --args "*) if [ -f ${q(hook)} ]; then mv ${q(hook)} ${q(`${hook}.ran`)} && sh ${q(`${hook}.ran`)}; fi ;; esac\nexec ${q(BWRAP!)} "$@"\n`,
      { mode: 0o755 },
    )
    daemon = await startTestDaemon({
      user: who === 'root' ? undefined : 'unprivileged',
      env: { HOME: userHome, PATH: `${bin}:${SYSTEM_PATH}`, TEND_SANDBOX: 'workspace', TEND_SPAWNER: spawner },
    })
    expect((await daemon.client.status()).spawner, 'the daemon runs another spawner').toBe(spawner)
  })

  afterAll(() => endSuite(taskIds, base, daemon))

  beforeEach(() => {
    rmSync(folder, { recursive: true, force: true })
    rmSync(file, { recursive: true, force: true })
    mkdirSync(folder, { mode: 0o700 })
    writeFileSync(join(folder, 'id'), `${first}\n`, { mode: 0o600 })
    writeFileSync(file, `${first}\n`, { mode: 0o600 })
    for (const path of [folder, join(folder, 'id'), file]) asOwner(path)
  })

  test.each(CHANGES)('%s: the task runs, and reads nothing of what is there', async (_title, change) => {
    const second = `second-secret-${randomBytes(6).toString('hex')}`
    writeFileSync(hook, `${change(folder, file, second)}\n`, { mode: 0o644 })
    const look = [folder, join(folder, 'id'), file, join(file, 'id')].map((path) => `cat ${q(path)} 2>/dev/null`)
    const started = await daemon.client.start({
      command: [...look, `ls -A ${q(folder)} ${q(file)} 2>/dev/null`, 'echo done'].join('; '),
      shell: true,
      cwd: workspace,
      sandbox: 'workspace',
    })
    taskIds.push(started.id)
    const ended = await daemon.client.wait(started.id)
    const output = (await daemon.client.read(started.id)).data
    expect(existsSync(hook), 'the wrapper did not make the change').toBe(false)
    expect(ended, `${ended.reason ?? ''} ${output}`).toMatchObject({ state: 'exited', exitCode: 0 })
    expect(output).toMatch(/done\n$/)
    // A sandbox that could not be set up left nothing in the task's output.
    expect(output).not.toContain('bwrap')
    expect(output).not.toContain(first)
    expect(output).not.toContain(second)
  })
})
