import { afterAll, beforeAll, describe, expect } from 'vitest'
import { randomBytes } from 'node:crypto'
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Task } from '../../client/index.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { eachSandboxedProfile } from '../helpers/profiles.js'
import { checkUnprivilegedUser, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * Files in a task's idmapped folders whose owner or group is not the folder's. The idmap shows the
 * folder's owner as the task's uid; every other id must keep its own number (not be unmapped),
 * or the kernel refuses every change to such a file with EOVERFLOW even where the task's rights
 * on the folder allow it (rm in a folder it may write, chmod of a file it owns whose group is
 * another). The task still gets no right of those ids: it cannot chmod or write another uid's
 * file. Checked with real tasks, root daemon (the only one that idmaps), from the host.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
/** An id above the range task identities are chosen in: the last extent of the map. */
const HIGH_ID = 4_000_000_000

describe("files of other ids in a task's idmapped folders, daemon as root", () => {
  const base = join('/var/tmp', `tend-idmap-ids-${process.pid}-${randomBytes(4).toString('hex')}`)
  const user = checkUnprivilegedUser()
  let daemon: TestDaemon
  const taskIds: string[] = []

  beforeAll(async () => {
    mkdirSync(base, { mode: 0o711 })
    chmodSync(base, 0o711)
    daemon = await startTestDaemon({ env: { PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_KILL_GRACE: '500ms' } })
  })

  afterAll(async () => {
    try {
      await waitFor('no process of any idmap-ids task left', () => taskIds.every((id) => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0))
    } finally {
      await daemon?.stop()
      rmSync(base, { recursive: true, force: true })
    }
  })

  /** A 0755 folder owned by `by`. */
  function folder(by: { uid: number; gid: number }): string {
    const dir = mkdtempSync(join(base, 'ws-'))
    chownSync(dir, by.uid, by.gid)
    chmodSync(dir, 0o755)
    return dir
  }

  function plant(path: string, by: { uid: number; gid: number }, mode = 0o644): void {
    writeFileSync(path, 'planted\n', { mode })
    chownSync(path, by.uid, by.gid)
    chmodSync(path, mode)
  }

  async function attempt(line: string, cwd: string, sandbox: 'workspace' | 'strict'): Promise<{ task: Task; output: string }> {
    const started = await daemon.client.start({ command: line, shell: true, cwd, sandbox, timeoutMs: 30_000 })
    taskIds.push(started.id)
    const task = await daemon.client.wait(started.id, { timeoutMs: 45_000 })
    return { task, output: (await daemon.client.read(started.id)).data }
  }

  eachSandboxedProfile(
    "files of other owners and groups in the task's folders can be removed, renamed, chmod'ed and written as the folder's rights allow",
    () => daemon.client,
    async (sandbox) => {
      // A root-owned cwd holding files of ids below and above the task's, and a file of root's with another group.
      const rootCwd = folder({ uid: 0, gid: 0 })
      plant(join(rootCwd, 'users-file'), user)
      plant(join(rootCwd, 'high-file'), { uid: HIGH_ID, gid: HIGH_ID })
      plant(join(rootCwd, 'group-file'), { uid: 0, gid: user.gid })
      const first = await attempt(
        [
          'rm -f users-file && echo "rm users-file ok"',
          'rm -f high-file && echo "rm high-file ok"',
          'chmod 600 group-file && echo "chmod ok"',
          'echo more >> group-file && echo "write ok"',
          'mv group-file moved && echo "mv ok"',
        ].join('; '),
        rootCwd,
        sandbox,
      )
      expect(first.output).toBe('rm users-file ok\nrm high-file ok\nchmod ok\nwrite ok\nmv ok\n')
      // From the host: gone, renamed, its mode and content changed, owner and group kept.
      expect(existsSync(join(rootCwd, 'users-file'))).toBe(false)
      expect(existsSync(join(rootCwd, 'high-file'))).toBe(false)
      const moved = lstatSync(join(rootCwd, 'moved'))
      expect({ uid: moved.uid, gid: moved.gid, mode: moved.mode & 0o7777 }).toEqual({ uid: 0, gid: user.gid, mode: 0o600 })
      expect(readFileSync(join(rootCwd, 'moved'), 'utf8')).toBe('planted\nmore\n')

      // A user's cwd holding a file of root's: the ids below the folder owner's keep theirs too.
      const usersCwd = folder(user)
      plant(join(usersCwd, 'roots-file'), { uid: 0, gid: 0 })
      const second = await attempt('rm -f roots-file && echo "rm roots-file ok"', usersCwd, sandbox)
      expect(second.output).toBe('rm roots-file ok\n')
      expect(existsSync(join(usersCwd, 'roots-file'))).toBe(false)
    },
  )

  eachSandboxedProfile(
    "the task still cannot chmod, chown or write another uid's 0644 file in its folder",
    () => daemon.client,
    async (sandbox) => {
      const cwd = folder({ uid: 0, gid: 0 })
      plant(join(cwd, 'theirs'), user)
      const { output } = await attempt(
        ['chmod 666 theirs; echo "chmod $?"', 'chown "$(id -u)" theirs; echo "chown $?"', '(echo more >> theirs) 2>&1 | sed "s/.*: //"', 'cat theirs'].join(
          '; ',
        ),
        cwd,
        sandbox,
      )
      expect(output).toMatch(
        /^chmod: changing permissions of 'theirs': Operation not permitted\nchmod 1\nchown: changing ownership of 'theirs': Operation not permitted\nchown 1\nPermission denied\nplanted\n$/,
      )
      const after = lstatSync(join(cwd, 'theirs'))
      expect({ uid: after.uid, gid: after.gid, mode: after.mode & 0o7777 }).toEqual({ uid: user.uid, gid: user.gid, mode: 0o644 })
      expect(readFileSync(join(cwd, 'theirs'), 'utf8')).toBe('planted\n')
    },
  )
})
