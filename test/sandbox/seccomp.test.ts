import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { randomBytes } from 'node:crypto'
import { execFileSync, spawnSync } from 'node:child_process'
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { StartOptions, Task } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { checkUnprivilegedUser, startTestDaemon, type TestDaemon, type TestDaemonOptions } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { chownTree as chownOwnedTree } from '../helpers/chown-tree.js'
import { eachSandboxedProfile, type SandboxedProfile } from '../helpers/profiles.js'

/*
 * The seccomp filters of the sandboxed profiles, tried as a hostile task would: every route to a
 * setuid or setgid file or a file capability, the kernel interfaces a build never needs, new user
 * namespaces and the ia32 ABI. Each attempt runs as a real task, in workspace and strict, with the
 * daemon as root and as the unprivileged test user, and the host is checked from outside. Then
 * everyday work, which must still just work under the filter.
 *
 * Everything lives under /var/tmp: a sandboxed task has a private /tmp.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
const PYTHON = '/usr/bin/python3'
const SET_ID_BITS = 0o6000
/**
 * The ioctls that reach fallocate, as include/linux/falloc.h defines them: `_IOW('X', nr, struct
 * space_resv)`, a 48-byte struct (asm-generic/ioctl.h: write << 30 | size << 16 | 'X' << 8 | nr).
 */
const spaceReservation = (nr: number) => ((1 << 30) | (48 << 16) | (0x58 << 8) | nr) >>> 0
const SPACE_RESERVATIONS = {
  FS_IOC_RESVSP: spaceReservation(40),
  FS_IOC_UNRESVSP: spaceReservation(41),
  FS_IOC_RESVSP64: spaceReservation(42),
  FS_IOC_UNRESVSP64: spaceReservation(43),
  FS_IOC_ZERO_RANGE: spaceReservation(57),
}

/**
 * System calls the probes make by number (ctypes has no wrapper for them), by `platform.machine()`.
 * A call an architecture does not have is left out there.
 */
const SYSCALLS = {
  x86_64: {
    chmod: 90,
    fchmod: 91,
    fchmodat: 268,
    fchmodat2: 452,
    open: 2,
    openat: 257,
    openat2: 437,
    creat: 85,
    mkdir: 83,
    mkdirat: 258,
    mknod: 133,
    mknodat: 259,
    setxattr: 188,
    lsetxattr: 189,
    fsetxattr: 190,
    setxattrat: 463,
    keyctl: 250,
    add_key: 248,
    request_key: 249,
    bpf: 321,
    perf_event_open: 298,
    userfaultfd: 323,
    io_uring_setup: 425,
    io_uring_enter: 426,
    io_uring_register: 427,
    init_module: 175,
    finit_module: 313,
    delete_module: 176,
    kexec_load: 246,
    kexec_file_load: 320,
    unshare: 272,
    clone: 56,
    clone3: 435,
  },
  aarch64: {
    fchmod: 52,
    fchmodat: 53,
    fchmodat2: 452,
    openat: 56,
    openat2: 437,
    mkdirat: 34,
    mknodat: 33,
    setxattr: 5,
    lsetxattr: 6,
    fsetxattr: 7,
    setxattrat: 463,
    keyctl: 219,
    add_key: 217,
    request_key: 218,
    bpf: 280,
    perf_event_open: 241,
    userfaultfd: 282,
    io_uring_setup: 425,
    io_uring_enter: 426,
    io_uring_register: 427,
    init_module: 105,
    finit_module: 273,
    delete_module: 106,
    kexec_load: 104,
    kexec_file_load: 294,
    unshare: 97,
    clone: 220,
    clone3: 435,
  },
}

/** Shared by the probes: `attempt(name, call)` prints `name: OK` or `name: <errno name>`. */
const PROBE_PRELUDE = `import ctypes, errno, os, platform, stat, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = ${JSON.stringify(SYSCALLS)}[platform.machine()]
AT_FDCWD = -100
def raw(name, *args):
    """The system call by number, every argument a full 64-bit register; -errno on failure."""
    result = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return -ctypes.get_errno() if result < 0 else result
def attempt(name, call):
    try:
        result = call()
        if isinstance(result, int) and result < 0:
            print(f'{name}: {errno.errorcode[-result]}', flush=True)
        else:
            print(f'{name}: OK', flush=True)
    except OSError as error:
        print(f'{name}: {errno.errorcode[error.errno]}', flush=True)
def has(name):
    return name in NR
`

const PROBES: Record<string, string> = {
  // Every system call that takes a mode, each with a setuid or setgid bit. The high word of a mode
  // is ignored by the kernel: a mode with it set must be judged by its low word, as the kernel does.
  'set-id.py': `${PROBE_PRELUDE}
HIGH = 0xffffffff << 32
path = lambda name: ctypes.c_char_p(name.encode())
open('plain', 'w').close()
os.mkdir('plain-dir')
attempt('os.chmod 4755', lambda: os.chmod('plain', 0o4755))
attempt('os.chmod 2755', lambda: os.chmod('plain', 0o2755))
attempt('os.chmod 2755 on a folder', lambda: os.chmod('plain-dir', 0o2755))
fd = os.open('plain', os.O_RDONLY)
attempt('os.fchmod 6755', lambda: os.fchmod(fd, 0o6755))
attempt('os.open O_CREAT 4755', lambda: os.close(os.open('py-open', os.O_CREAT | os.O_WRONLY, 0o4755)))
attempt('os.open O_TMPFILE 4755', lambda: os.close(os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o4755)))
attempt('os.mkdir 2755', lambda: os.mkdir('py-mkdir', 0o2755))
attempt('os.mknod 4755', lambda: os.mknod('py-mknod', stat.S_IFREG | 0o4755))
attempt('fchmodat 4755', lambda: raw('fchmodat', AT_FDCWD, path('plain'), 0o4755))
attempt('fchmodat2 4755', lambda: raw('fchmodat2', AT_FDCWD, path('plain'), 0o4755, 0))
attempt('fchmodat2 4755 high word set', lambda: raw('fchmodat2', AT_FDCWD, path('plain'), HIGH | 0o4755, 0))
attempt('openat O_CREAT 4755 high word set', lambda: raw('openat', AT_FDCWD, path('raw-openat'), os.O_CREAT | os.O_WRONLY | HIGH, HIGH | 0o4755))
attempt('mkdirat 2755', lambda: raw('mkdirat', AT_FDCWD, path('raw-mkdirat'), 0o2755))
attempt('mknodat 2755', lambda: raw('mknodat', AT_FDCWD, path('raw-mknodat'), stat.S_IFREG | 0o2755, 0))
if has('chmod'):
    attempt('chmod 4755 high word set', lambda: raw('chmod', path('plain'), HIGH | 0o4755))
    attempt('open O_CREAT 4755', lambda: raw('open', path('raw-open'), os.O_CREAT | os.O_WRONLY, 0o4755))
    attempt('creat 4755', lambda: raw('creat', path('raw-creat'), 0o4755))
    attempt('mkdir 2755', lambda: raw('mkdir', path('raw-mkdir'), 0o2755))
    attempt('mknod 4755', lambda: raw('mknod', path('raw-mknod'), stat.S_IFREG | 0o4755, 0))
`,
  // A file capability (and, since BPF cannot tell names apart, every other extended attribute).
  'xattr.py': `${PROBE_PRELUDE}
open('capfile', 'w').close()
# VFS_CAP_REVISION_2 with the effective flag: cap_setuid (7) permitted.
capability = (0x02000001).to_bytes(4, 'little') + (1 << 7).to_bytes(4, 'little') + bytes(12)
name = ctypes.c_char_p(b'security.capability')
value = ctypes.create_string_buffer(capability, len(capability))
attempt('os.setxattr security.capability', lambda: os.setxattr('capfile', 'security.capability', capability))
attempt('lsetxattr security.capability', lambda: raw('lsetxattr', ctypes.c_char_p(b'capfile'), name, value, len(capability), 0))
fd = os.open('capfile', os.O_RDONLY)
attempt('fsetxattr security.capability', lambda: raw('fsetxattr', fd, name, value, len(capability), 0))
class XattrArgs(ctypes.Structure):
    _fields_ = [('value', ctypes.c_uint64), ('size', ctypes.c_uint32), ('flags', ctypes.c_uint32)]
args = XattrArgs(ctypes.cast(value, ctypes.c_void_p).value, len(capability), 0)
attempt('setxattrat security.capability', lambda: raw('setxattrat', AT_FDCWD, ctypes.c_char_p(b'capfile'), 0, name, ctypes.byref(args), ctypes.sizeof(args)))
attempt('os.setxattr user.note', lambda: os.setxattr('capfile', 'user.note', b'x'))
`,
  // Kernel interfaces a build never needs. Each call is one that succeeds, or fails for another
  // reason than EPERM, when nothing filters it (but the module calls: no CAP_SYS_MODULE either).
  'kernel.py': `${PROBE_PRELUDE}
KEY_SPEC_SESSION_KEYRING, KEY_SPEC_PROCESS_KEYRING = -3, -2
attempt('keyctl', lambda: raw('keyctl', 0, KEY_SPEC_SESSION_KEYRING, 1))
attempt('add_key', lambda: raw('add_key', ctypes.c_char_p(b'user'), ctypes.c_char_p(b'tend-probe'), ctypes.c_char_p(b'v'), 1, KEY_SPEC_PROCESS_KEYRING))
attempt('request_key', lambda: raw('request_key', ctypes.c_char_p(b'user'), ctypes.c_char_p(b'tend-none'), None, 0))
attempt('bpf', lambda: raw('bpf', 9999, None, 0))
attempt('perf_event_open', lambda: raw('perf_event_open', None, 0, -1, -1, 0))
attempt('userfaultfd', lambda: raw('userfaultfd', os.O_CLOEXEC | 1))
attempt('io_uring_setup', lambda: raw('io_uring_setup', 1, ctypes.create_string_buffer(120)))
attempt('io_uring_enter', lambda: raw('io_uring_enter', -1, 0, 0, 0, None, 0))
attempt('io_uring_register', lambda: raw('io_uring_register', -1, 0, None, 0))
attempt('init_module', lambda: raw('init_module', None, 0, ctypes.c_char_p(b'')))
attempt('finit_module', lambda: raw('finit_module', -1, ctypes.c_char_p(b''), 0))
attempt('delete_module', lambda: raw('delete_module', ctypes.c_char_p(b'tend_none'), 0))
attempt('kexec_load', lambda: raw('kexec_load', 0, 0, None, 0))
attempt('kexec_file_load', lambda: raw('kexec_file_load', -1, -1, 0, None, 0))
`,
  // New user namespaces, and the calls whose flags BPF cannot read.
  'userns.py': `${PROBE_PRELUDE}
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
def clone_newuser():
    pid = raw('clone', CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        os._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)
    return pid
attempt('unshare(CLONE_NEWUSER)', lambda: raw('unshare', CLONE_NEWUSER))
attempt('unshare(CLONE_NEWUSER) high word set', lambda: raw('unshare', (1 << 32) | CLONE_NEWUSER))
attempt('clone(CLONE_NEWUSER)', clone_newuser)
attempt('clone3', lambda: raw('clone3', None, 0))
how = ctypes.create_string_buffer(24)
attempt('openat2', lambda: raw('openat2', AT_FDCWD, ctypes.c_char_p(b'.'), how, 24))
`,
}

/**
 * An ia32 system call from a 64-bit process: chmod (ia32 number 15) through `int $0x80`, with the
 * path in the low 4 GiB (the ia32 entry reads 32-bit pointers). Prints the result.
 */
const IA32_CHMOD_C = `#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
int main(int argc, char **argv) {
  if (argc != 2) return 2;
  char *low = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
  if (low == MAP_FAILED) return 3;
  strncpy(low, argv[1], 4095);
  long result;
  __asm__ volatile("int $0x80" : "=a"(result) : "a"(15L), "b"(low), "c"(04755L) : "memory", "r8", "r9", "r10", "r11");
  printf("ia32 chmod: %ld\\n", result);
  return result == 0 ? 0 : 1;
}
`

function defineSuite(who: 'root' | 'non-root'): void {
  describe(`seccomp filters, daemon as ${who}`, () => {
    // Named now, made when the suite runs (beforeAll): a filtered run that skips it leaves nothing behind.
    const base = join('/var/tmp', `tend-seccomp-${who}-${process.pid}-${randomBytes(4).toString('hex')}`)
    const userHome = join(base, 'user')
    const probes = join(base, 'probes')
    const source = join(base, 'source')
    const owner = who === 'root' ? { uid: 0, gid: 0 } : checkUnprivilegedUser()
    const daemonUser: TestDaemonOptions['user'] = who === 'root' ? undefined : 'unprivileged'
    let daemon: TestDaemon
    const taskIds: string[] = []

    beforeAll(async () => {
      mkdirSync(base, { mode: 0o755 })
      mkdirSync(userHome)
      mkdirSync(probes)
      for (const [name, text] of Object.entries(PROBES)) writeFileSync(join(probes, name), text)
      // A setuid program made outside the sandbox, by the daemon's user: what `cp -p` would copy.
      mkdirSync(source)
      const setuidSource = join(source, 'setuid-sh')
      writeFileSync(setuidSource, readFileSync('/bin/sh'))
      if (process.arch === 'x64') {
        writeFileSync(join(probes, 'ia32-chmod.c'), IA32_CHMOD_C)
        execFileSync('cc', ['-O2', '-o', join(probes, 'ia32-chmod'), join(probes, 'ia32-chmod.c')])
      }
      chownTree(base)
      chmodSync(setuidSource, 0o4755)
      daemon = await startTestDaemon({ user: daemonUser, env: { HOME: userHome, PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_KILL_GRACE: '500ms' } })
    })

    afterAll(async () => {
      try {
        await waitFor('no process of any seccomp-suite task left', () =>
          taskIds.every((id) => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0),
        )
      } finally {
        await daemon?.stop()
        rmSync(base, { recursive: true, force: true })
      }
    })

    const chownTree = (path: string) => chownOwnedTree(path, owner)

    function workspace(): string {
      const dir = mkdtempSync(join(base, 'ws-'))
      chownTree(dir)
      return dir
    }

    function q(value: string): string {
      return `'${value.replace(/'/g, `'\\''`)}'`
    }

    const eachProfile = (title: string, body: (sandbox: SandboxedProfile) => Promise<void>, timeoutMs?: number) =>
      eachSandboxedProfile(title, () => daemon.client, body, timeoutMs)

    async function run(line: string, options: Partial<StartOptions> & { sandbox: 'workspace' | 'strict' }): Promise<{ task: Task; output: string }> {
      const started = await daemon.client.start({ command: line, shell: true, cwd: options.cwd ?? workspace(), timeoutMs: 120_000, ...options })
      taskIds.push(started.id)
      const task = await daemon.client.wait(started.id, { timeoutMs: 150_000 })
      return { task, output: (await daemon.client.read(started.id)).data }
    }

    /** The `name: result` lines a probe printed. */
    function results(output: string): Record<string, string> {
      return Object.fromEntries(
        output.split('\n').flatMap((line) => {
          const match = /^(.+): (OK|E[A-Z0-9]+)$/.exec(line)
          return match ? [[match[1]!, match[2]!]] : []
        }),
      )
    }

    /** Every file and folder under `dir` (itself included) with a setuid or setgid bit, as the host sees it. */
    function setIdFiles(dir: string): string[] {
      const found: string[] = []
      const visit = (path: string) => {
        const stats = lstatSync(path)
        if (stats.mode & SET_ID_BITS) found.push(`${path} (${(stats.mode & 0o7777).toString(8)})`)
        if (stats.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name))
      }
      visit(dir)
      return found
    }

    /** Extended attributes of every file under `dir`, read on the host with os.listxattr (Node has no xattr calls). */
    function xattrsUnder(dir: string): string[] {
      const program =
        'import os, sys\nfor root, dirs, files in os.walk(sys.argv[1]):\n    for name in dirs + files:\n        path = os.path.join(root, name)\n        for attr in os.listxattr(path, follow_symlinks=False):\n            print(path, attr)\n'
      return execFileSync(PYTHON, ['-c', program, dir], { encoding: 'utf8' }).split('\n').filter(Boolean)
    }

    describe('no planted privileges', () => {
      eachProfile('no system call that takes a mode can set a setuid or setgid bit: each fails with EPERM, and the host sees no such bit', async (sandbox) => {
        const cwd = workspace()
        const { output } = await run(`${PYTHON} ${q(join(probes, 'set-id.py'))}`, { sandbox, cwd })
        const seen = results(output)
        const expected = [
          'os.chmod 4755',
          'os.chmod 2755',
          'os.chmod 2755 on a folder',
          'os.fchmod 6755',
          'os.open O_CREAT 4755',
          'os.open O_TMPFILE 4755',
          'os.mkdir 2755',
          'os.mknod 4755',
          'fchmodat 4755',
          'fchmodat2 4755',
          'fchmodat2 4755 high word set',
          'openat O_CREAT 4755 high word set',
          'mkdirat 2755',
          'mknodat 2755',
          ...(process.arch === 'x64' ? ['chmod 4755 high word set', 'open O_CREAT 4755', 'creat 4755', 'mkdir 2755', 'mknod 4755'] : []),
        ]
        expect(seen, output).toEqual(Object.fromEntries(expected.map((name) => [name, 'EPERM'])))
        expect(setIdFiles(cwd)).toEqual([])
      })

      eachProfile('the everyday tools cannot make a setuid or setgid file either (chmod, install -m, mkdir -m, cp -p of one made outside)', async (sandbox) => {
        const cwd = workspace()
        const routes = {
          'chmod 4755': 'cp /bin/sh sh-copy && chmod 4755 sh-copy',
          'chmod u+s': 'chmod u+s sh-copy',
          'chmod g+s': 'chmod g+s sh-copy',
          'chmod g+s on a folder': 'mkdir -p folder && chmod g+s folder',
          'install -m 4755': 'install -m 4755 /bin/sh sh-install',
          'mkdir -m 2755': 'mkdir -m 2755 made-setgid',
          'cp -p of a setuid file': `cp -p ${q(join(source, 'setuid-sh'))} sh-preserved`,
          'cp -a of a setuid file': `cp -a ${q(join(source, 'setuid-sh'))} sh-archived`,
        }
        const line = Object.entries(routes)
          .map(([name, command]) => `if out=$( { ${command}; } 2>&1); then echo ${q(`${name}: OK`)}; else echo "${name}: failed: $out"; fi`)
          .join('\n')
        const { output } = await run(line, { sandbox, cwd })
        // A task on an identity of its own (a root daemon's) cannot give its copy the source's owner
        // (root), so cp drops the set-id bits itself, as coreutils does for any user: the copy is
        // made, bare, and the filter never sees a set-id mode. Otherwise cp asks for the bits and is refused.
        const ownIdentity = (await daemon.client.status()).sandbox.identity.as === 'task'
        const copies = ['cp -p of a setuid file', 'cp -a of a setuid file']
        for (const name of Object.keys(routes)) {
          const pattern =
            ownIdentity && copies.includes(name)
              ? `^${name.replace(/[+.]/g, '\\$&')}: OK$`
              : `^${name.replace(/[+.]/g, '\\$&')}: failed: .*Operation not permitted`
          expect(output, name).toMatch(new RegExp(pattern, 'm'))
        }
        expect(setIdFiles(cwd)).toEqual([])
        // The copies that were made are there, only without the bits.
        expect(lstatSync(join(cwd, 'sh-copy')).mode & 0o777).toBe(0o755)
        if (ownIdentity) for (const copy of ['sh-preserved', 'sh-archived']) expect(lstatSync(join(cwd, copy)).mode & 0o7777, copy).toBe(0o755)
      })

      eachProfile(
        'no file capability can be set (setxattr, lsetxattr, fsetxattr, setxattrat): "not supported", and the host sees no extended attribute',
        async (sandbox) => {
          const cwd = workspace()
          const { output } = await run(`${PYTHON} ${q(join(probes, 'xattr.py'))}`, { sandbox, cwd })
          // EOPNOTSUPP, which Python names ENOTSUP (the same 95 on Linux): "this file system has no extended attributes".
          expect(results(output), output).toEqual({
            'os.setxattr security.capability': 'ENOTSUP',
            'lsetxattr security.capability': 'ENOTSUP',
            'fsetxattr security.capability': 'ENOTSUP',
            'setxattrat security.capability': 'ENOTSUP',
            'os.setxattr user.note': 'ENOTSUP',
          })
          expect(existsSync(join(cwd, 'capfile'))).toBe(true)
          expect(xattrsUnder(cwd)).toEqual([])
        },
      )
    })

    describe('no disk its files do not show', () => {
      eachProfile(
        'fallocate past the end of a file (keep size, punch or zero a range) is not supported, on its output and in its cwd, nor its ioctl forms (FS_IOC_RESVSP and kin); plain fallocate still works',
        async (sandbox) => {
          const cwd = workspace()
          // Python's os.posix_fallocate is mode 0; the other modes go through fallocate(2) by ctypes,
          // and the ioctls with a struct space_resv (l_type, l_whence, l_start, l_len, ...; 48 bytes).
          const probe = [
            'import ctypes, errno, fcntl, os, struct, termios',
            'libc = ctypes.CDLL(None, use_errno=True)',
            'def fallocate(name, fd, mode):',
            '    result = libc.fallocate(fd, mode, ctypes.c_long(0), ctypes.c_long(256 << 20))',
            "    print(f'{name}: ' + ('OK' if result == 0 else errno.errorcode[ctypes.get_errno()]), flush=True)",
            'def reserve(name, fd, request):',
            "    space = struct.pack('hhqqiI4i', 0, 0, 0, 256 << 20, 0, 0, 0, 0, 0, 0)",
            '    try:',
            '        fcntl.ioctl(fd, request, space)',
            "        print(f'{name}: OK', flush=True)",
            '    except OSError as error:',
            "        print(f'{name}: ' + errno.errorcode[error.errno], flush=True)",
            "fd = os.open('big', os.O_WRONLY | os.O_CREAT, 0o644)",
            "fallocate('keep size in the cwd', fd, 0x01)",
            "fallocate('punch a hole', fd, 0x01 | 0x02)",
            "fallocate('zero a range', fd, 0x10)",
            "fallocate('keep size on the output', 1, 0x01)",
            ...Object.entries(SPACE_RESERVATIONS).flatMap(([name, request]) => [
              `reserve('${name} in the cwd', fd, ${request})`,
              `reserve('${name} on the output', 1, ${request})`,
            ]),
            // Other ioctls are not touched: a terminal request on a file answers as it always did.
            "reserve('TCGETS', fd, termios.TCGETS)",
            'os.posix_fallocate(fd, 0, 1 << 20)',
            "print('plain: OK', flush=True)",
          ].join('\n')
          const { task, output } = await run(`${PYTHON} -c ${q(probe)}`, { sandbox, cwd })
          // EOPNOTSUPP, which Python names ENOTSUP (the same 95 on Linux).
          const reservations = Object.fromEntries(
            Object.keys(SPACE_RESERVATIONS).flatMap((name) => [
              [`${name} in the cwd`, 'ENOTSUP'],
              [`${name} on the output`, 'ENOTSUP'],
            ]),
          )
          expect(results(output), output).toEqual({
            'keep size in the cwd': 'ENOTSUP',
            'punch a hole': 'ENOTSUP',
            'zero a range': 'ENOTSUP',
            'keep size on the output': 'ENOTSUP',
            ...reservations,
            TCGETS: 'ENOTTY',
            plain: 'OK',
          })
          // What the host holds for them: the plain 1 MiB, nothing past the ends.
          expect(lstatSync(join(cwd, 'big')).size).toBe(1 << 20)
          expect(lstatSync(join(cwd, 'big')).blocks * 512).toBeLessThan(2 << 20)
          const outputLog = join(daemon.home, 'spool', task.id, 'output.log')
          expect(lstatSync(outputLog).blocks * 512).toBeLessThan(1 << 20)
        },
      )
    })

    describe('kernel interfaces a build never needs', () => {
      eachProfile('keyrings, bpf, perf_event_open, userfaultfd, io_uring, kernel modules and kexec fail with EPERM', async (sandbox) => {
        const { output } = await run(`${PYTHON} ${q(join(probes, 'kernel.py'))}`, { sandbox })
        const calls = [
          'keyctl',
          'add_key',
          'request_key',
          'bpf',
          'perf_event_open',
          'userfaultfd',
          'io_uring_setup',
          'io_uring_enter',
          'io_uring_register',
          'init_module',
          'finit_module',
          'delete_module',
          'kexec_load',
          'kexec_file_load',
        ]
        expect(results(output), output).toEqual(Object.fromEntries(calls.map((name) => [name, 'EPERM'])))
      })

      eachProfile(
        'no new user namespace: unshare -U, unshare(2) and clone with CLONE_NEWUSER fail with EPERM; clone3 and openat2 answer ENOSYS',
        async (sandbox) => {
          const { output } = await run(`unshare -U true; unshare -r true; ${PYTHON} ${q(join(probes, 'userns.py'))}`, { sandbox })
          expect(output).toMatch(/^unshare: unshare failed: Operation not permitted\nunshare: unshare failed: Operation not permitted\n/)
          expect(results(output), output).toEqual({
            'unshare(CLONE_NEWUSER)': 'EPERM',
            'unshare(CLONE_NEWUSER) high word set': 'EPERM',
            'clone(CLONE_NEWUSER)': 'EPERM',
            clone3: 'ENOSYS',
            openat2: 'ENOSYS',
          })
        },
      )

      eachProfile('an ia32 system call (int $0x80) kills the process before it runs: its chmod 4755 never happens', async (sandbox) => {
        if (process.arch !== 'x64') throw new Error(`this test enters the ia32 ABI of x86-64; on ${process.arch} the foreign ABI needs its own probe`)
        // Outside the sandbox the same program makes a setuid file where the kernel runs IA-32 code.
        // A kernel without IA-32 emulation faults at the int (SIGSEGV) and runs nothing of the call:
        // the route does not exist there, and the task dies the same way.
        const hostTarget = join(base, `ia32-host-${sandbox}`)
        writeFileSync(hostTarget, '')
        const modeBefore = lstatSync(hostTarget).mode & 0o7777
        const host = spawnSync(join(probes, 'ia32-chmod'), [hostTarget], { encoding: 'utf8' })
        const routeExists = host.signal !== 'SIGSEGV'
        if (routeExists) expect({ stdout: host.stdout, status: host.status }).toEqual({ stdout: 'ia32 chmod: 0\n', status: 0 })
        expect(lstatSync(hostTarget).mode & 0o7777).toBe(routeExists ? 0o4755 : modeBefore)
        rmSync(hostTarget)

        const cwd = workspace()
        writeFileSync(join(cwd, 'target'), '')
        chownTree(cwd)
        const { output } = await run(`${q(join(probes, 'ia32-chmod'))} target; echo "exit $?"`, { sandbox, cwd })
        // 128 + SIGSYS (31), as the shell reports it: killed by the filter, before the call and before
        // its printf; without IA-32 emulation, 128 + SIGSEGV (11), as on the host.
        expect(output).toBe(routeExists ? 'Bad system call\nexit 159\n' : 'Segmentation fault\nexit 139\n')
        expect(setIdFiles(cwd)).toEqual([])
      })
    })

    /** Files in a task's spool folder that hold a seccomp program: one starts with its first instruction, load the architecture (BPF_LD|BPF_W|BPF_ABS, offset 4). */
    function programsIn(spool: string): string[] {
      const programStart = Buffer.from([0x20, 0, 0, 0, 4, 0, 0, 0])
      return readdirSync(spool).filter((name) => {
        const path = join(spool, name)
        return lstatSync(path).isFile() && readFileSync(path).subarray(0, 8).equals(programStart)
      })
    }

    eachProfile(
      "the filter reaches bubblewrap in memory: the task and its sandbox's init (which it may ptrace) run under one seccomp filter, and nothing is written into its spool folder for it",
      async (sandbox) => {
        const { task, output } = await run("grep -E '^Seccomp(_filters)?:' /proc/1/status /proc/self/status", { sandbox })
        expect(output).toMatch(
          /^\/proc\/1\/status:Seccomp:\s+2\n\/proc\/1\/status:Seccomp_filters:\s+1\n\/proc\/self\/status:Seccomp:\s+2\n\/proc\/self\/status:Seccomp_filters:\s+1\n$/,
        )
        expect(programsIn(task.spool)).toEqual([])
      },
    )

    eachProfile('the node fallback spawner hands bubblewrap the same filter', async (sandbox) => {
      const fallback = await startTestDaemon({ user: daemonUser, env: { HOME: userHome, PATH: SYSTEM_PATH, TEND_SPAWNER: 'node' } })
      try {
        expect((await fallback.client.status()).spawner).toBe('node')
        const cwd = workspace()
        const started = await fallback.client.start({
          command: "grep -E '^Seccomp(_filters)?:' /proc/self/status; cp /bin/sh sh-copy && chmod 4755 sh-copy",
          shell: true,
          cwd,
          sandbox,
        })
        taskIds.push(started.id)
        const task = await fallback.client.wait(started.id, { timeoutMs: 60_000 })
        const output = (await fallback.client.read(started.id)).data
        expect(output).toMatch(/^Seccomp:\s+2\nSeccomp_filters:\s+1\nchmod: changing permissions of 'sh-copy': Operation not permitted\n$/)
        expect(setIdFiles(cwd)).toEqual([])
        expect(programsIn(task.spool)).toEqual([])
      } finally {
        await fallback.stop()
      }
    })

    describe('everyday work under the filter', () => {
      eachProfile(
        'sh, mkdir -p, chmod 755/644, cp -p and cp -a, a cc build, git init/add/commit, python3 -m venv and npm --version all work',
        async (sandbox) => {
          const cwd = workspace()
          const line = [
            'set -e',
            'mkdir -p deep/a/b && echo "mkdir -p: ok"',
            'echo text > file && chmod 755 file && chmod 644 file && chmod 0755 deep && chmod a+x file && chmod 1777 deep/a && echo "chmod: ok"',
            `${PYTHON} -c "import os; os.chmod('file', 0o640); os.close(os.open('created', os.O_CREAT | os.O_WRONLY, 0o644)); os.mkdir('made', 0o755); print('python modes: ok')"`,
            'echo moved > /tmp/from-tmp && mv /tmp/from-tmp moved && cp -p file file-p && cp -a deep deep-a && echo "cp -p, cp -a, mv: ok"',
            `printf '#include <stdio.h>\\nint main(void) { puts("built and ran"); return 0; }\\n' > main.c && cc -o main main.c && ./main`,
            'git init -q repo && cd repo && echo hi > tracked && git add tracked && git -c user.email=agent@example.com -c user.name=agent commit -qm first && cd .. && echo "git: ok"',
            `${PYTHON} -m venv venv && venv/bin/python -c "import sys; print('venv: ok' if sys.prefix != sys.base_prefix else 'venv: not a venv')"`,
            'echo "npm $(npm --version)"',
          ].join('\n')
          const { task, output } = await run(line, { sandbox, cwd })
          expect(output).toMatch(/^mkdir -p: ok\nchmod: ok\npython modes: ok\ncp -p, cp -a, mv: ok\nbuilt and ran\ngit: ok\nvenv: ok\nnpm \d+\.\d+\.\d+\n$/)
          expect(task).toMatchObject({ state: 'exited', exitCode: 0 })
          expect(lstatSync(join(cwd, 'file')).mode & 0o7777).toBe(0o640)
          expect(lstatSync(join(cwd, 'deep', 'a')).mode & 0o7777).toBe(0o1777)
          expect(lstatSync(join(cwd, 'file-p')).mode & 0o7777).toBe(0o640)
          expect(execFileSync('git', ['-c', 'safe.directory=*', '-C', join(cwd, 'repo'), 'log', '--format=%s'], { encoding: 'utf8' })).toBe('first\n')
        },
        180_000,
      )

      // strict denies the socket pairs libuv makes for a child's stdio (docs/sandbox.md); workspace must not.
      test('workspace: node starts a child process (libuv falls back from clone3 to clone)', async () => {
        const program =
          "require('child_process').execFile('sh', ['-c', 'echo child of node: ok'], (error, out) => { if (error) throw error; process.stdout.write(out) })"
        const { task, output } = await run(`node -e ${q(program)}`, { sandbox: 'workspace' })
        expect(output).toBe('child of node: ok\n')
        expect(task).toMatchObject({ state: 'exited', exitCode: 0 })
      })
    })

    test('a bubblewrap that cannot load the filter leaves workspace and strict unavailable, saying why, and their tasks are refused', async () => {
      // What a kernel without CONFIG_SECCOMP_FILTER does to bubblewrap: the real one, failing wherever it is handed a filter.
      const bin = join(base, 'no-seccomp-bin')
      mkdirSync(bin)
      writeFileSync(
        join(bin, 'bwrap'),
        '#!/bin/sh\nfor arg in "$@"; do [ "$arg" = --seccomp ] && { echo "bwrap: prctl(PR_SET_SECCOMP): Invalid argument" >&2; exit 1; }; done\nexec /usr/bin/bwrap "$@"\n',
        { mode: 0o755 },
      )
      chownTree(bin)
      const without = await startTestDaemon({ user: daemonUser, env: { HOME: userHome, PATH: `${bin}:${SYSTEM_PATH}`, TEND_SANDBOX: 'workspace' } })
      try {
        const status = await without.client.status()
        expect(status.sandbox.profiles).toEqual(['off'])
        for (const profile of ['workspace', 'strict'] as const)
          expect(status.sandbox.missing[profile]).toMatch(/could not load tend's seccomp filter here \(the kernel needs CONFIG_SECCOMP_FILTER\)/)
        for (const sandbox of ['workspace', 'strict'] as const) {
          await expect(without.client.start({ command: ['true'], cwd: workspace(), sandbox })).rejects.toMatchObject({
            code: 'TEND_ERR_SANDBOX_UNAVAILABLE',
            statusCode: 503,
          })
        }
      } finally {
        await without.stop()
      }
    })

    test('tend status says which filter each profile gets', async () => {
      const status = await daemon.client.status()
      expect(status.sandbox.filters).toEqual({
        off: null,
        workspace: {
          name: 'baseline',
          denies: expect.arrayContaining(['setuid/setgid modes', 'new user namespaces', 'keyrings', 'io_uring', 'ia32 and x32 system calls']),
        },
        strict: { name: 'strict', denies: expect.arrayContaining(['everything the baseline denies', 'ptrace', 'Unix-domain sockets']) },
      })
      const cli = await runCli(['status'], daemon.env)
      expect(cli.exitCode).toBe(0)
      expect(cli.stdout).toMatch(
        /^seccomp: {5}workspace: the baseline filter \(denies setuid\/setgid modes, .*io_uring.*\)\n {13}strict: the strict filter \(denies everything the baseline denies, ptrace, .*\)\n {13}off: none\n/m,
      )
      const json = await runCli(['status', '--json'], daemon.env)
      expect(JSON.parse(json.stdout).sandbox.filters).toEqual(status.sandbox.filters)
    })
  })
}

defineSuite('root')
defineSuite('non-root')
