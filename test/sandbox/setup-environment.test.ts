import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { randomBytes } from 'node:crypto'
import { chownSync, closeSync, constants, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { checkUnprivilegedUser, startTestDaemon, type TestDaemon, endSuite } from '../helpers/test-daemon.js'
import { settlesWithin, waitFor } from '../helpers/wait-for.js'

/*
 * Where the daemon waits for bubblewrap's setup (a daemon that is not root), the shell in the
 * sandbox that says it is set up must run nothing the task chose: a task's variables (LD_PRELOAD
 * here, which an agent sets freely) reach only its command. Else the task's own code, run before
 * the line, could pass for a failed setup (planned again ten times, recorded as never run), or
 * hold its start, and every kill of it, for as long as it liked.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

/** A library an agent can build in its workspace: before the setup line (fd 2 a socket) it counts itself and plays bubblewrap failing. */
const PRELOAD_C = `#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
__attribute__((constructor)) static void pre(void) {
  struct stat st;
  if (fstat(2, &st) != 0 || !S_ISSOCK(st.st_mode)) return;
  const char *path = getenv("COUNT_FILE");
  if (path) { int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644); if (fd >= 0) { write(fd, "x", 1); close(fd); } }
  static const char say[] = "bwrap: Can't mkdir /home/nobody/.ssh: No such file or directory\\n";
  write(2, say, sizeof say - 1);
  _exit(1);
}
`

describe.each(['native', 'node'] as const)("a task's variables under a daemon that is not root (%s spawner)", (spawner) => {
  const base = join('/var/tmp', `tend-setup-env-${spawner}-${process.pid}-${randomBytes(4).toString('hex')}`)
  const userHome = join(base, 'home')
  let owner: { uid: number; gid: number }
  let daemon: TestDaemon
  const taskIds: string[] = []

  beforeAll(async () => {
    owner = checkUnprivilegedUser()
    mkdirSync(base, { mode: 0o711 })
    mkdirSync(userHome, { mode: 0o711 })
    chownSync(userHome, owner.uid, owner.gid)
    daemon = await startTestDaemon({ user: 'unprivileged', env: { HOME: userHome, PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_SPAWNER: spawner } })
    expect((await daemon.client.status()).spawner, 'the daemon runs another spawner').toBe(spawner)
  })

  afterAll(() => endSuite(taskIds, base, daemon))

  function workspace(name: string): string {
    const ws = join(base, name)
    mkdirSync(ws, { mode: 0o755 })
    chownSync(ws, owner.uid, owner.gid)
    return ws
  }

  test('LD_PRELOAD runs nothing before the setup line: the task runs once, as itself', async () => {
    const ws = workspace('preload')
    writeFileSync(join(ws, 'pre.c'), PRELOAD_C)
    execFileSync('cc', ['-shared', '-fPIC', '-o', join(ws, 'pre.so'), join(ws, 'pre.c')])
    const count = join(ws, 'count')
    const started = await daemon.client.start({
      command: 'echo task ran',
      shell: true,
      cwd: ws,
      sandbox: 'workspace',
      env: { LD_PRELOAD: join(ws, 'pre.so'), COUNT_FILE: count },
    })
    taskIds.push(started.id)
    const ended = await daemon.client.wait(started.id)
    expect({ state: ended.state, exitCode: ended.exitCode, runsBeforeTheLine: existsSync(count) ? readFileSync(count, 'utf8').length : 0 }).toEqual({
      state: 'exited',
      exitCode: 0,
      runsBeforeTheLine: 0,
    })
    expect((await daemon.client.read(started.id)).data).toBe('task ran\n')
  })

  test('a task whose loader waits on a FIFO it named in LD_PRELOAD is running, and its kill is answered', async () => {
    const ws = workspace('fifo')
    const fifo = join(ws, 'hold')
    execFileSync('mkfifo', ['-m', '0644', fifo])
    chownSync(fifo, owner.uid, owner.gid)
    const started = await daemon.client.start({ command: 'echo task ran', shell: true, cwd: ws, sandbox: 'workspace', env: { LD_PRELOAD: fifo } })
    taskIds.push(started.id)
    // Held in the task's own command: its start is reported, as for any task that waits.
    expect(await waitFor('the task reported running', async () => (await daemon.client.get(started.id)).state === 'running' || null)).toBe(true)
    const killed = await settlesWithin('the kill of the held task', daemon.client.kill(started.id), 15_000)
    expect(killed.state).toBe('killed')
    // Nothing is left to open the FIFO: a writer now finds no reader.
    expect(() => closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK))).toThrow(/ENXIO/)
  })
})
