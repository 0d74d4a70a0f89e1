import { afterAll, beforeAll, describe, expect } from 'vitest'
import { randomBytes } from 'node:crypto'
import { chownSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { checkUnprivilegedUser, startTestDaemon, type TestDaemon, endSuite } from '../helpers/test-daemon.js'
import { eachSandboxedProfile } from '../helpers/profiles.js'

/*
 * What a person typed lands in shell and REPL histories: a Redis URL with its password, an
 * `export TOKEN=…`, a `\password` in psql. A sandboxed task sees the daemon's HOME (read-only):
 * every history there must read empty to it, with the daemon as root and as a user. Checked on the
 * host: the files are there, as written.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

/** Histories of shells, REPLs and clients, as their programs name them under HOME. */
const HISTORIES = [
  '.bash_history',
  '.sh_history',
  '.zsh_history',
  '.zhistory',
  '.histfile',
  '.local/share/fish/fish_history',
  '.python_history',
  '.node_repl_history',
  '.irb_history',
  '.psql_history',
  '.mysql_history',
  '.sqlite_history',
  '.rediscli_history',
  '.dbshell',
  '.lesshst',
  '.viminfo',
]

function q(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`
}

function defineSuite(who: 'root' | 'non-root'): void {
  describe(`shell and REPL histories in the daemon's HOME, daemon as ${who}`, () => {
    const base = join('/var/tmp', `tend-history-${who}-${process.pid}-${randomBytes(4).toString('hex')}`)
    const userHome = join(base, 'user')
    const workspace = join(base, 'ws')
    const owner = who === 'root' ? { uid: 0, gid: 0 } : checkUnprivilegedUser()
    const secret = `redis://tend:pw-${randomBytes(8).toString('hex')}@redis.example:6380`
    let daemon: TestDaemon
    const taskIds: string[] = []

    beforeAll(async () => {
      mkdirSync(base, { mode: 0o711 })
      for (const dir of [userHome, workspace]) {
        mkdirSync(dir, { mode: 0o711 })
        chownSync(dir, owner.uid, owner.gid)
      }
      for (const relative of HISTORIES) {
        const path = join(userHome, relative)
        for (let dir = dirname(path); dir !== userHome && dir.startsWith(userHome); dir = dirname(dir)) {
          mkdirSync(dir, { recursive: true, mode: 0o700 })
          chownSync(dir, owner.uid, owner.gid)
        }
        writeFileSync(path, `tend worker --redis ${secret}\n`, { mode: 0o600 })
        chownSync(path, owner.uid, owner.gid)
      }
      daemon = await startTestDaemon({
        user: who === 'root' ? undefined : 'unprivileged',
        env: { HOME: userHome, PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace' },
      })
    })

    afterAll(() => endSuite(taskIds, base, daemon))

    eachSandboxedProfile(
      'a task reads none of them',
      () => daemon.client,
      async (sandbox) => {
        const line = [...HISTORIES.map((relative) => `cat ${q(join(userHome, relative))} 2>/dev/null | sed 's|^|read ${relative}: |'`), 'echo done'].join('; ')
        const started = await daemon.client.start({ command: line, shell: true, cwd: workspace, sandbox, timeoutMs: 20_000 })
        taskIds.push(started.id)
        const task = await daemon.client.wait(started.id, { timeoutMs: 40_000 })
        const output = (await daemon.client.read(started.id)).data
        expect(output, task.reason ?? '').toContain('done\n')
        expect(output).not.toMatch(/^read /m)
        expect(output).not.toContain(secret)
        // They are there on the host: had they shown, the task would have read them.
        for (const relative of HISTORIES) expect(readFileSync(join(userHome, relative), 'utf8'), relative).toContain(secret)
      },
    )
  })
}

defineSuite('root')
defineSuite('non-root')
