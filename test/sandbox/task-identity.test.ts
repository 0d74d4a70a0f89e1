import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { execFileSync, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { StartOptions, Task } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { checkUnprivilegedUser, startTestDaemon, type TestDaemon, type TestDaemonOptions } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { chooseTaskId, idTaken, TASK_ID_LAST } from '../../daemon/sandbox/owner-ids.js'

/*
 * A task's identity (issue 24: "a task never holds a privileged host identity"): a root daemon's
 * sandboxed tasks run on an unprivileged uid of their own, their writable folders idmapped to
 * each folder's owner; every task gets a fresh session keyring. Each check runs a real task and
 * looks from the host: /proc, the owners of what it made, what it printed.
 *
 * Everything lives under /var/tmp (a sandboxed task has a private /tmp), in a folder others may
 * enter (0711) but not list: the task's uid must be able to reach its cwd.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
const PYTHON = '/usr/bin/python3'
const ROOT_SECRET = `PLANTED-ROOT-ONLY-${randomBytes(4).toString('hex')}`
const SSH_SECRET = `PLANTED-IDENTITY-SSH-${randomBytes(4).toString('hex')}`
const DAEMON_KEY = 'tend-test:daemon-session-key'
const DAEMON_KEY_PAYLOAD = `daemon-keyring-secret-${randomBytes(6).toString('hex')}`
const GIT_AUTHOR = 'Planted Operator <operator@example.invalid>'
/** The range task identities are chosen in (docs/sandbox.md). */
const TASK_ID_FIRST = 1879048192

/**
 * Keyrings through the raw system calls (no keyutils here): `session DESC PAYLOAD FILE -- ARGV`
 * joins a new session keyring, adds a key to it, writes the key's serial to FILE and execs ARGV;
 * `plant DESC PAYLOAD` adds a key to the caller's session keyring; `probe DESC SERIAL` searches the
 * session keyring for DESC and reads the key SERIAL, printing what it got.
 */
const KEYS_PY = `import ctypes, errno, os, platform, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
ADD_KEY, KEYCTL = {'x86_64': (248, 250), 'aarch64': (217, 219)}[platform.machine()]
SESSION = -3
def call(number, *args):
    result = libc.syscall(number, *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return result if result >= 0 else 'error ' + errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
def add(description, payload):
    return call(ADD_KEY, b'user', description.encode(), payload.encode(), len(payload), SESSION)
command = sys.argv[1]
if command == 'session':
    description, payload, serial_file = sys.argv[2:5]
    joined = call(KEYCTL, 1, b'tend-test-daemon-session')
    serial = add(description, payload)
    with open(serial_file, 'w') as out:
        out.write(f'{joined} {serial}')
    os.execv(sys.argv[6], sys.argv[6:])
elif command == 'plant':
    print('planted', add(sys.argv[2], sys.argv[3]), flush=True)
elif command == 'probe':
    print('search:', call(KEYCTL, 10, SESSION, b'user', sys.argv[2].encode(), 0), flush=True)
    buffer = ctypes.create_string_buffer(512)
    got = call(KEYCTL, 11, int(sys.argv[3]), buffer, 512)
    print('read:', buffer.raw[:got].decode(errors='replace') if isinstance(got, int) else got, flush=True)
`

const q = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`
/** Who a task ran as: set once it started (a corrupt entry has none). */
const ranAsOf = (task: Task) => ('ranAs' in task ? task.ranAs : undefined)

function defineSuite(who: 'root' | 'non-root'): void {
  describe(`task identity, daemon as ${who}`, () => {
    const base = join('/var/tmp', `tend-identity-${who}-${process.pid}-${randomBytes(4).toString('hex')}`)
    const home = join(base, 'home')
    const probes = join(base, 'probes')
    const keysPy = join(probes, 'keys.py')
    const rootOnly = join(base, 'root-only.txt')
    const serialFile = join(base, 'daemon-key-serial')
    const owner = who === 'root' ? { uid: 0, gid: 0 } : checkUnprivilegedUser()
    const daemonUser: TestDaemonOptions['user'] = who === 'root' ? undefined : 'unprivileged'
    let daemon: TestDaemon
    let daemonKeySerial: number
    const taskIds: string[] = []

    beforeAll(async () => {
      mkdirSync(base, { mode: 0o711 })
      chmodSync(base, 0o711)
      mkdirSync(join(home, '.ssh'), { recursive: true, mode: 0o700 })
      chmodSync(home, 0o700)
      writeFileSync(join(home, '.gitconfig'), `[user]\n\tname = Planted Operator\n\temail = operator@example.invalid\n`, { mode: 0o600 })
      writeFileSync(join(home, '.ssh', 'id_rsa'), `${SSH_SECRET}\n`, { mode: 0o600 })
      for (const path of [home, join(home, '.ssh'), join(home, '.gitconfig'), join(home, '.ssh', 'id_rsa')]) chownSync(path, owner.uid, owner.gid)
      mkdirSync(probes, { mode: 0o755 })
      writeFileSync(keysPy, KEYS_PY, { mode: 0o644 })
      writeFileSync(rootOnly, `${ROOT_SECRET}\n`, { mode: 0o600 })
      // The launcher writes the serial as the daemon's user.
      writeFileSync(serialFile, '', { mode: 0o600 })
      chownSync(serialFile, owner.uid, owner.gid)
      daemon = await startTestDaemon({
        user: daemonUser,
        launcher: [PYTHON, keysPy, 'session', DAEMON_KEY, DAEMON_KEY_PAYLOAD, serialFile, '--'],
        env: { HOME: home, PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_KILL_GRACE: '500ms' },
      })
      const [joined, serial] = readFileSync(serialFile, 'utf8').split(' ').map(Number)
      // The daemon really holds a session keyring with the key in it: otherwise the keyring tests prove nothing.
      expect(joined, 'the launcher joined a session keyring').toBeGreaterThan(0)
      expect(serial, 'the launcher planted the key').toBeGreaterThan(0)
      daemonKeySerial = serial!
    })

    afterAll(async () => {
      try {
        await waitFor('no process of any identity-suite task left', () =>
          taskIds.every((id) => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0),
        )
      } finally {
        await daemon?.stop()
        rmSync(base, { recursive: true, force: true })
      }
    })

    /** A folder for one task, owned by `by` (the daemon's user unless said), 0700. */
    function folder(by: { uid: number; gid: number } = owner): string {
      const dir = mkdtempSync(join(base, 'ws-'))
      chownSync(dir, by.uid, by.gid)
      return dir
    }

    async function attempt(line: string, options: Partial<StartOptions> = {}, on: TestDaemon = daemon): Promise<{ task: Task; output: string }> {
      const started = await on.client.start({ command: line, shell: true, cwd: options.cwd ?? folder(), timeoutMs: 30_000, ...options })
      taskIds.push(started.id)
      const task = await on.client.wait(started.id, { timeoutMs: 45_000 })
      return { task, output: (await on.client.read(started.id)).data }
    }

    /** Starts a task that prints `ready` and stays; answers it once `ready` is in its output. */
    async function startStaying(line: string, options: Partial<StartOptions> = {}): Promise<{ task: Task; output: () => Promise<string> }> {
      const task = await daemon.client.start({
        command: `${line}; echo ready; exec sleep 60`,
        shell: true,
        cwd: options.cwd ?? folder(),
        timeoutMs: 60_000,
        ...options,
      })
      taskIds.push(task.id)
      const output = async () => (await daemon.client.read(task.id)).data
      await waitFor(
        `task ${task.id} to print ready`,
        async () => (await output()).includes('ready\n') || ['exited', 'failed', 'killed'].includes((await daemon.client.get(task.id)).state),
        20_000,
      )
      return { task, output }
    }

    /** Uid and Gid lines (real, effective, saved, filesystem) of every live process of a task, read on the host. */
    function hostIdentities(taskId: string): Array<{ pid: number; uid: string[]; gid: string[] }> {
      return processesWithEnv(`TEND_TASK_ID=${taskId}`)
        .filter(isAlive)
        .map((pid) => {
          const status = readFileSync(`/proc/${pid}/status`, 'utf8')
          const field = (name: string) => new RegExp(`^${name}:\\s+(.*)$`, 'm').exec(status)![1]!.split(/\s+/)
          return { pid, uid: field('Uid'), gid: field('Gid') }
        })
    }

    /** Every path under `dir` with its owner, as the host sees it (lstat). */
    function owners(dir: string): Record<string, string> {
      const found: Record<string, string> = {}
      const walk = (path: string) => {
        for (const name of readdirSync(path)) {
          const entry = join(path, name)
          const info = lstatSync(entry)
          found[entry.slice(dir.length + 1)] = `${info.uid}:${info.gid}`
          if (info.isDirectory()) walk(entry)
        }
      }
      walk(dir)
      return found
    }

    function eachSandbox(title: string, body: (sandbox: 'workspace' | 'strict') => Promise<void>): void {
      for (const sandbox of ['workspace', 'strict'] as const) {
        test(`${sandbox}: ${title}`, async (context) => {
          const status = await daemon.client.status()
          expect(status.sandbox.profiles, `${sandbox} is not available to this daemon: ${status.sandbox.missing[sandbox]}`).toContain(sandbox)
          await body(sandbox)
        })
      }
    }

    if (who === 'root') {
      eachSandbox('the task runs on an unprivileged uid and gid of its own, inside and as the host sees every process of it', async (sandbox) => {
        const { task, output } = await startStaying('id -u; id -g', { sandbox })
        const [uid, gid] = (await output()).split('\n').map(Number)
        expect(uid, 'id -u inside').not.toBe(0)
        expect(gid, 'id -g inside').not.toBe(0)
        const seen = hostIdentities(task.id)
        expect(seen.length, 'processes of the task on the host').toBeGreaterThan(0)
        for (const each of seen)
          expect(each, `/proc/${each.pid}/status`).toEqual({ pid: each.pid, uid: Array(4).fill(String(uid)), gid: Array(4).fill(String(gid)) })
        // An identity nobody else has: unknown to the user database, in the range tend takes them from.
        expect(uid).toBeGreaterThanOrEqual(TASK_ID_FIRST)
        expect(spawnSync('getent', ['passwd', String(uid)]).status, `getent passwd ${uid}`).toBe(2)
        expect(spawnSync('getent', ['group', String(gid)]).status, `getent group ${gid}`).toBe(2)
        const status = await daemon.client.status()
        // The task is the default owner's: its uid is listed as that owner's.
        expect(status.sandbox.identity).toMatchObject({ as: 'task', uid: null, gid: null, fallback: null })
        expect(status.sandbox.identity.owners).toContainEqual({ owner: 'operator', uid, gid })
        expect(status.sandbox.keyring).toEqual({ fresh: true })
        const text = await runCli(['status'], daemon.env)
        expect(text.stdout).toContain(`operator ${uid}`)
        const running = await daemon.client.get(task.id)
        expect(ranAsOf(running)).toEqual({ uid, gid, identity: 'task', keyring: 'own' })
        await daemon.client.kill(task.id, { graceMs: 0 })
      })

      eachSandbox(
        "what the task makes belongs to each folder's owner: root in a root-owned cwd, tend-test in a cwd or writable folder of tend-test's",
        async (sandbox) => {
          const user = checkUnprivilegedUser()
          const cwd = folder()
          const theirs = folder(user)
          const { task, output } = await attempt(
            `mkdir -p made/deeper && echo x > made/deeper/file && echo y > top && ln -s top link && mkdir ${q(join(theirs, 'mine'))} && echo z > ${q(join(theirs, 'mine', 'file'))} && echo w > ${q(join(theirs, 'top'))} && echo done`,
            { cwd, sandbox, writablePaths: [theirs] },
          )
          expect(task.state, output).toBe('exited')
          expect(output).toBe('done\n')
          expect(owners(cwd)).toEqual({ made: '0:0', 'made/deeper': '0:0', 'made/deeper/file': '0:0', top: '0:0', link: '0:0' })
          const mine = `${user.uid}:${user.gid}`
          expect(owners(theirs)).toEqual({ mine, 'mine/file': mine, top: mine })
          // And with tend-test's folder as the cwd itself.
          const theirCwd = folder(user)
          const second = await attempt('mkdir made && echo x > made/file && echo done', { cwd: theirCwd, sandbox })
          expect(second.output).toBe('done\n')
          expect(owners(theirCwd)).toEqual({ made: mine, 'made/file': mine })
        },
      )

      eachSandbox('a root-only file outside its folders and the masks, which uid 0 could read, stays unreadable', async (sandbox) => {
        const { output } = await attempt(`cat ${q(rootOnly)}; echo "cat exited $?"`, { sandbox })
        expect(output).not.toContain(ROOT_SECRET)
        expect(output).toMatch(/Permission denied\ncat exited 1\n$/)
      })

      eachSandbox("git still works: a commit from a subfolder, authored from the operator's 0600 ~/.gitconfig; ~/.ssh stays masked", async (sandbox) => {
        const repo = folder()
        const git = (...args: string[]) =>
          execFileSync('git', args, { cwd: repo, encoding: 'utf8', env: { PATH: SYSTEM_PATH, HOME: home, GIT_CONFIG_NOSYSTEM: '1' } })
        git('init', '-q')
        mkdirSync(join(repo, 'sub'))
        git('commit', '-q', '--allow-empty', '-m', 'start')
        const { task, output } = await attempt(
          `echo hi > note && git add note && git commit -q -m 'from the task' && git log -1 --format='%an <%ae>'; cat ~/.ssh/id_rsa; echo "ssh $?"`,
          { cwd: join(repo, 'sub'), sandbox },
        )
        expect(task.state, output).toBe('exited')
        expect(output).toMatch(new RegExp(`^${GIT_AUTHOR}\n(.|\n)*ssh \\d+\n$`))
        expect(output).not.toContain(SSH_SECRET)
        expect(git('log', '-1', '--format=%an <%ae> %s').trim()).toBe(`${GIT_AUTHOR} from the task`)
        expect(Object.entries(owners(repo)).filter(([, who]) => who !== '0:0')).toEqual([])
      })

      eachSandbox("a project inside the daemon's 0700 HOME is reached and written as root's, while the rest of HOME stays read-only", async (sandbox) => {
        const project = mkdtempSync(join(home, 'project-'))
        const { task, output } = await attempt(`echo x > made && cat ~/.gitconfig | head -1; (echo y > ~/planted) 2>&1 | sed 's/.*: //'; echo done`, {
          cwd: project,
          sandbox,
        })
        expect(task.state, output).toBe('exited')
        expect(output).toBe('[user]\nRead-only file system\ndone\n')
        expect(owners(project)).toEqual({ made: '0:0' })
        expect(existsSync(join(home, 'planted'))).toBe(false)
      })

      test("a cwd behind a folder the task's uid cannot enter is refused when submitted, naming it", async () => {
        const locked = mkdtempSync(join(base, 'locked-'))
        chmodSync(locked, 0o700)
        const cwd = join(locked, 'project')
        mkdirSync(cwd)
        const attempted = daemon.client.start({ command: 'echo ran', shell: true, cwd, sandbox: 'workspace' })
        await expect(attempted).rejects.toMatchObject({
          code: 'TEND_ERR_VALIDATION',
          message: expect.stringMatching(
            new RegExp(`${cwd} cannot be reached by the tasks' user \\(uid \\d+.*\\): it may not enter ${locked}\\. .*chmod o\\+x ${locked}`),
          ),
        })
      })
    } else {
      eachSandbox("the task keeps the daemon's uid, and what it makes is the daemon user's", async (sandbox) => {
        const { task, output } = await attempt('id -u; id -g; mkdir made && echo x > made/file && echo done', { sandbox })
        expect(task.state, output).toBe('exited')
        expect(output).toBe(`${owner.uid}\n${owner.gid}\ndone\n`)
        expect(Object.values(owners(task.cwd))).toEqual([`${owner.uid}:${owner.gid}`, `${owner.uid}:${owner.gid}`])
        expect(ranAsOf(task)).toEqual({ uid: owner.uid, gid: owner.gid, identity: 'daemon', keyring: 'own' })
        const status = await daemon.client.status()
        expect(status.sandbox.identity).toMatchObject({ as: 'daemon', uid: owner.uid, gid: owner.gid, fallback: null })
      })
    }

    for (const sandbox of ['off', 'workspace', 'strict'] as const) {
      test(`${sandbox}: the task cannot read a key the daemon's session keyring holds`, async (context) => {
        const status = await daemon.client.status()
        if (sandbox !== 'off')
          expect(status.sandbox.profiles, `${sandbox} is not available to this daemon: ${status.sandbox.missing[sandbox]}`).toContain(sandbox)
        const { task, output } = await attempt(`${PYTHON} ${q(keysPy)} probe ${q(DAEMON_KEY)} ${daemonKeySerial}`, { sandbox })
        expect(task.state, output).toBe('exited')
        expect(output).toMatch(/^search: error \w+\nread: error \w+\n$/)
        expect(output).not.toContain(DAEMON_KEY_PAYLOAD)
      })
    }

    for (const sandbox of ['off', 'workspace'] as const) {
      test(`${sandbox}: a key one owner's task plants in its session keyring is not seen by another owner's task`, async () => {
        const planted = `tend-test:planted-${randomBytes(4).toString('hex')}`
        const payload = `planted-payload-${randomBytes(6).toString('hex')}`
        const planter = await startStaying(`${PYTHON} ${q(keysPy)} plant ${q(planted)} ${q(payload)}`, { sandbox, owner: 'alice' })
        const said = await planter.output()
        // Where keyrings are open to the task, the key is there while the planter runs.
        const serial = /^planted (\d+)$/m.exec(said)?.[1]
        if (sandbox === 'off') expect(serial, said).toBeDefined()
        const { output } = await attempt(`${PYTHON} ${q(keysPy)} probe ${q(planted)} ${serial ?? 1}`, { sandbox, owner: 'bob' })
        expect(output).toMatch(/^search: error \w+\nread: error \w+\n$/)
        expect(output).not.toContain(payload)
        await daemon.client.kill(planter.task.id, { graceMs: 0 })
      })
    }
  })
}

defineSuite('root')
defineSuite('non-root')

describe('task identity: where idmapped mounts cannot be made', () => {
  test('a root daemon on the node spawner says its sandboxed tasks fall back to uid 0, and why, in status and on each task', async () => {
    const base = mkdtempSync('/var/tmp/tend-identity-node-')
    chmodSync(base, 0o711)
    const daemon = await startTestDaemon({ env: { PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_SPAWNER: 'node' } })
    try {
      const status = await daemon.client.status()
      expect(status.sandbox.identity).toMatchObject({ as: 'daemon', uid: 0, gid: 0, fallback: expect.stringContaining('node') })
      expect(status.sandbox.keyring).toEqual({ fresh: false, reason: expect.stringContaining('node') })
      const text = await runCli(['status'], daemon.env)
      expect(text.stdout).toContain(`run as uid 0 without capabilities: ${status.sandbox.identity.fallback}`)
      expect(text.stdout).toContain(status.sandbox.keyring.reason)
      const started = await daemon.client.start({ command: 'id -u', shell: true, cwd: mkdtempSync(join(base, 'ws-')), sandbox: 'workspace' })
      const task = await daemon.client.wait(started.id, { timeoutMs: 30_000 })
      expect((await daemon.client.read(started.id)).data).toBe('0\n')
      expect(ranAsOf(task)).toEqual({ uid: 0, gid: 0, identity: 'daemon', fallback: status.sandbox.identity.fallback, keyring: 'daemon' })
    } finally {
      await daemon.stop()
      rmSync(base, { recursive: true, force: true })
    }
    expect(existsSync(base)).toBe(false)
  })
})

describe('choosing the task uid', () => {
  test('a seed gets the same uid every time, another seed another; a taken one is passed over for the next', async () => {
    const first = (await chooseTaskId('/var/lib/tend-a\0alice', () => false))!
    expect(first).toBeGreaterThanOrEqual(TASK_ID_FIRST)
    expect(first).toBeLessThanOrEqual(TASK_ID_LAST)
    expect(await chooseTaskId('/var/lib/tend-a\0alice', () => false)).toBe(first)
    expect(await chooseTaskId('/var/lib/tend-a\0bob', () => false)).not.toBe(first)
    expect(await chooseTaskId('/var/lib/tend-b\0alice', () => false)).not.toBe(first)
    expect(await chooseTaskId('/var/lib/tend-a\0alice', (id) => id === first)).toBe(first === TASK_ID_LAST ? TASK_ID_FIRST : first + 1)
    expect(await chooseTaskId('/var/lib/tend-a\0alice', () => true)).toBeNull()
  })

  test('an id is taken when the user database or the group database knows it', async () => {
    const user = checkUnprivilegedUser()
    expect(await idTaken(0)).toBe(true)
    expect(await idTaken(user.uid)).toBe(true)
    // A group that no user shares its number with counts too.
    const groupOnly = readFileSync('/etc/group', 'utf8')
      .split('\n')
      .map((line) => Number(line.split(':')[2]))
      .find((gid) => Number.isInteger(gid) && spawnSync('getent', ['passwd', String(gid)]).status === 2)
    expect(groupOnly, 'a group whose number no user has').toBeDefined()
    expect(await idTaken(groupOnly!)).toBe(true)
    expect(await idTaken(TASK_ID_LAST)).toBe(false)
  })
})
