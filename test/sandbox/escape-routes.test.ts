import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { randomBytes } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import { homeRegistryDir } from '../../daemon/store/home-registry.js'
import type { StartOptions, Task } from '../../client/index.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { runCli } from '../helpers/cli.js'
import { checkUnprivilegedUser, daemonEnv, startTestDaemon, type TestDaemon, type TestDaemonOptions } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { chownTree as chownOwnedTree } from '../helpers/chown-tree.js'
import { eachSandboxedProfile, type SandboxedProfile } from '../helpers/profiles.js'

/*
 * The five escape routes of the sandbox-hardening issue, each tried as an attacker would, with a
 * marker on the host that a successful attempt leaves behind. Companion to escape.test.ts (which
 * covers the read-only root, masks, network, processes and strict's limits).
 *
 * Everything lives under /var/tmp: a sandboxed task has a private /tmp.
 */

const SSH_SECRET = 'PLANTED-ROUTES-SSH-KEY-0b7d13'
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
const PYTHON = '/usr/bin/python3'
const TMP_SIZE = 8 * 1024 * 1024

/** The whole suite, against a daemon as root and as the unprivileged test user. */
function defineRoutes(who: 'root' | 'non-root'): void {
  describe(`escape routes, daemon as ${who}`, () => {
    // Named now, made when the suite runs (beforeAll): a filtered run that skips it leaves nothing behind.
    const base = join('/var/tmp', `tend-routes-${who}-${process.pid}-${randomBytes(4).toString('hex')}`)
    const userHome = join(base, 'user')
    const tendHome = join(base, 'tend-home')
    const otherHome = join(base, 'other-home')
    const outside = join(base, 'outside')
    const corePatternBefore = readFileSync('/proc/sys/kernel/core_pattern', 'utf8')

    const owner = who === 'root' ? { uid: 0, gid: 0 } : checkUnprivilegedUser()
    const daemonUser: TestDaemonOptions['user'] = who === 'root' ? undefined : 'unprivileged'

    function plantHost(): void {
      // Others may enter it (not list it): a root daemon's tasks run on a uid of their own, which must reach their cwd.
      mkdirSync(base, { mode: 0o711 })
      chmodSync(base, 0o711)
      mkdirSync(join(userHome, '.ssh'), { recursive: true, mode: 0o700 })
      writeFileSync(join(userHome, '.ssh', 'id_rsa'), `${SSH_SECRET}\n`, { mode: 0o600 })
      writeFileSync(join(userHome, '.bashrc'), '# planted\n')
      mkdirSync(join(userHome, '.cache', 'host-tool'), { recursive: true })
      writeFileSync(join(userHome, '.cache', 'host-tool', 'entry'), 'host cache\n')
      mkdirSync(outside)
      mkdirSync(tendHome)
      mkdirSync(otherHome)
      writeFileSync(join(tendHome, 'config.json'), JSON.stringify({ tmpSizeBytes: TMP_SIZE }))
      chownTree(base)
    }

    const chownTree = (path: string) => chownOwnedTree(path, owner)

    let daemon: TestDaemon
    let other: TestDaemon
    const taskIds: string[] = []

    beforeAll(async () => {
      plantHost()
      daemon = await startTestDaemon({
        user: daemonUser,
        home: tendHome,
        env: { HOME: userHome, PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_KILL_GRACE: '500ms', TEND_PER_OWNER_CONCURRENCY: '1' },
      })
      // Another daemon of the same user, unsandboxed by default: the prize of route 5.
      other = await startTestDaemon({ user: daemonUser, home: otherHome, env: { HOME: userHome, PATH: SYSTEM_PATH, TEND_SANDBOX: 'off' } })
    })

    afterAll(async () => {
      try {
        await waitFor('no process of any route-suite task left', () =>
          taskIds.every((id) => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0),
        )
      } finally {
        if (readFileSync('/proc/sys/kernel/core_pattern', 'utf8') !== corePatternBefore) writeFileSync('/proc/sys/kernel/core_pattern', corePatternBefore)
        await other?.stop()
        await daemon?.stop()
        rmSync(base, { recursive: true, force: true })
      }
    })

    const eachProfile = (title: string, body: (sandbox: SandboxedProfile) => Promise<void>, timeoutMs?: number) =>
      eachSandboxedProfile(title, () => daemon.client, body, timeoutMs)

    function workspace(): string {
      const dir = mkdtempSync(join(base, 'ws-'))
      chownSync(dir, owner.uid, owner.gid)
      // Others may enter it: a project inside it stays reachable by a root daemon's task uid.
      chmodSync(dir, 0o711)
      return dir
    }

    function q(value: string): string {
      return `'${value.replace(/'/g, `'\\''`)}'`
    }

    async function attempt(line: string, options: Partial<StartOptions> = {}): Promise<{ task: Task; output: string }> {
      const started = await daemon.client.start({
        command: line,
        shell: true,
        cwd: options.cwd ?? workspace(),
        timeoutMs: 20_000,
        sandbox: 'workspace',
        ...options,
      })
      taskIds.push(started.id)
      const task = await daemon.client.wait(started.id, { timeoutMs: 40_000 })
      return { task, output: (await daemon.client.read(started.id)).data }
    }

    /** A Python line that POSTs a task to a daemon's socket: the escape of routes 2 and 5. */
    function postTaskLine(socket: string, markerFile: string): string {
      const body = JSON.stringify({ command: [`echo escaped > ${markerFile}`], shell: true, cwd: '/', sandbox: 'off' })
      const program = [
        'import socket, sys',
        's = socket.socket(socket.AF_UNIX)',
        `s.connect(${JSON.stringify(socket)})`,
        `body = ${JSON.stringify(body)}.encode()`,
        "s.sendall(b'POST /v1/tasks HTTP/1.1\\r\\nHost: tend\\r\\nContent-Type: application/json\\r\\nContent-Length: ' + str(len(body)).encode() + b'\\r\\nConnection: close\\r\\n\\r\\n' + body)",
        "print('answer:', s.recv(4096).decode(errors='replace').split('\\r\\n')[0], flush=True)",
      ].join('\n')
      return `${PYTHON} -c ${q(program)}`
    }

    describe('route 1: the kernel knobs under /proc, and capabilities', () => {
      eachProfile('/proc/sys and /proc/sysrq-trigger are read-only (rewriting a knob with its own value fails)', async (sandbox) => {
        const knobs = ['kernel/core_pattern', 'kernel/printk', 'vm/overcommit_memory', 'kernel/hostname', 'net/ipv4/ip_forward']
        const { output } = await attempt(
          [
            ...knobs.map((knob) => `cat /proc/sys/${knob} > /proc/sys/${knob} && echo ESCAPED-${knob}`),
            "sh -c ': > /proc/sysrq-trigger' 2>/dev/null && echo ESCAPED-sysrq",
            'echo done',
          ].join('; '),
          { sandbox },
        )
        expect(output).not.toContain('ESCAPED')
        expect(output).toContain('done\n')
      })

      eachProfile("nothing under /proc is writable but the task's own processes' files", async (sandbox) => {
        const { output } = await attempt(
          `find /proc \\( -path '/proc/[0-9]*' -o -path /proc/self -o -path /proc/thread-self \\) -prune -o -writable -print 2>/dev/null | sed 's/^/writable: /'; echo done`,
          { sandbox },
        )
        expect(output).toBe('done\n')
      })

      test('core_pattern cannot be pointed at a script in the workspace (the full escape: a crash runs it on the host)', async () => {
        const cwd = workspace()
        const marker = join(outside, 'core-pattern-escaped')
        writeFileSync(join(cwd, 'handler.sh'), `#!/bin/sh\necho escaped > ${marker}\n`, { mode: 0o755 })
        chownTree(cwd)
        const { output } = await attempt(
          `echo "|${join(cwd, 'handler.sh')}" > /proc/sys/kernel/core_pattern && echo ESCAPED; sh -c 'kill -SEGV $$'; echo done`,
          { cwd },
        )
        // The knob is global: unchanged on the host means the escape cannot have happened.
        expect(readFileSync('/proc/sys/kernel/core_pattern', 'utf8')).toBe(corePatternBefore)
        expect(output).not.toContain('ESCAPED')
        expect(existsSync(marker)).toBe(false)
      })

      eachProfile('the task holds no capabilities (effective, permitted, bounding, ambient)', async (sandbox) => {
        const { output } = await attempt("grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status", { sandbox })
        const caps = Object.fromEntries(
          output
            .trim()
            .split('\n')
            .map((line) => line.split(/:\s+/)),
        )
        expect(caps).toEqual({
          CapInh: '0000000000000000',
          CapPrm: '0000000000000000',
          CapEff: '0000000000000000',
          CapBnd: '0000000000000000',
          CapAmb: '0000000000000000',
        })
      })
    })

    // taskUser drops a root daemon's tasks to another user: a root-only setting, defined for root only.
    if (who === 'root')
      describe('route 1, for operators who want more: taskUser', () => {
        test('a root daemon with taskUser runs every task as that user: uid, gid, no groups, no capabilities, in every profile', async () => {
          const user = checkUnprivilegedUser()
          const runAs = await startTestDaemon({ env: { HOME: userHome, PATH: SYSTEM_PATH, TEND_TASK_USER: user.name } })
          // A project folder the user can reach (the suite's own base is root's, 0700).
          const projects = mkdtempSync('/var/tmp/tend-as-user-')
          chmodSync(projects, 0o755)
          try {
            // The user's own folder, behind one of root's it cannot enter.
            const unreachable = join(mkdtempSync(join(base, 'locked-')), 'as-user')
            mkdirSync(unreachable)
            chownSync(unreachable, user.uid, user.gid)
            await expect(runAs.client.start({ command: 'true', shell: true, cwd: unreachable, sandbox: 'workspace' })).rejects.toMatchObject({
              code: 'TEND_ERR_VALIDATION',
              message: expect.stringContaining("cannot be reached by the tasks' user"),
            })
            for (const sandbox of ['off', 'workspace', 'strict'] as const) {
              const cwd = mkdtempSync(join(projects, 'as-user-'))
              chownSync(cwd, user.uid, user.gid)
              const started = await runAs.client.start({
                command: "id -u; id -g; id -G; grep -E '^Cap(Prm|Eff|Amb):' /proc/self/status; echo written > file",
                shell: true,
                cwd,
                sandbox,
              })
              taskIds.push(started.id)
              const task = await runAs.client.wait(started.id, { timeoutMs: 20_000 })
              const output = (await runAs.client.read(started.id)).data
              expect(task.state, `${sandbox}: ${output}`).toBe('exited')
              expect(output.split('\n').slice(0, 3)).toEqual([String(user.uid), String(user.gid), String(user.gid)])
              expect(output).toMatch(/CapPrm:\s+0+\nCapEff:\s+0+\nCapAmb:\s+0+\n/)
              expect(readFileSync(join(cwd, 'file'), 'utf8')).toBe('written\n')
              // On a terminal too: the task runs as the user, and owns its terminal, as after a login.
              const onTerminal = await runAs.client.start({
                command: 'id -u; stat -L -c %u /proc/self/fd/0; test -t 1 && echo terminal',
                shell: true,
                cwd,
                sandbox,
                tty: true,
              })
              taskIds.push(onTerminal.id)
              expect(await runAs.client.wait(onTerminal.id, { timeoutMs: 20_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
              expect((await runAs.client.read(onTerminal.id)).data).toBe(`${user.uid}\r\n${user.uid}\r\nterminal\r\n`)
            }
          } finally {
            await runAs.stop()
            rmSync(projects, { recursive: true, force: true })
          }
        })

        test('an unknown taskUser keeps the daemon from starting, naming the setting', async () => {
          const result = await runCli(['daemon'], daemonEnv(mkdtempSync(join(base, 'bad-user-home-')), { TEND_TASK_USER: 'no-such-user-tend' }))
          expect(result.exitCode).toBe(2)
          expect(result.stderr).toMatch(/TEND_TASK_USER=no-such-user-tend: taskUser "no-such-user-tend" is not a user of this machine/)
        })
      })

    describe('route 2: path aliases (cwd and writable paths are decided on their real paths)', () => {
      test('a cwd symlinked to TEND_HOME is refused, and nothing reaches the socket', async () => {
        const cwd = workspace()
        symlinkSync(tendHome, join(cwd, 'home-link'))
        const marker = join(outside, 'via-home-link')
        await expect(attempt(postTaskLine(join(cwd, 'home-link', 'tend.sock'), marker), { cwd: join(cwd, 'home-link') })).rejects.toMatchObject({
          code: 'TEND_ERR_VALIDATION',
          statusCode: 400,
        })
        expect(existsSync(marker)).toBe(false)
      })

      test("a link the task made itself is refused as the next task's cwd (the agent's next call)", async () => {
        const cwd = workspace()
        const first = await attempt(
          `ln -s ${q(tendHome)} made-link && ln -s ${q(join(userHome, '.ssh'))} ssh-link && ln -s ${q(userHome)} home-link && echo linked`,
          { cwd },
        )
        expect(first.output).toBe('linked\n')
        for (const link of ['made-link', 'ssh-link', 'home-link']) {
          const refused = attempt(`cat id_rsa; ${postTaskLine('tend.sock', join(outside, `via-${link}`))}`, { cwd: join(cwd, link) })
          await expect(refused, link).rejects.toMatchObject({ code: 'TEND_ERR_VALIDATION', message: expect.stringContaining(link) })
          expect(existsSync(join(outside, `via-${link}`))).toBe(false)
        }
      })

      test('writable paths symlinked to a secret folder, the home, TEND_HOME or a system folder are refused', async () => {
        const cwd = workspace()
        const links: Record<string, string> = {
          ssh: join(userHome, '.ssh'),
          home: userHome,
          tend: tendHome,
          spool: join(tendHome, 'spool'),
          etc: '/etc',
          other: otherHome,
        }
        for (const [name, target] of Object.entries(links)) symlinkSync(target, join(cwd, name))
        for (const name of Object.keys(links)) {
          await expect(attempt('echo pwned > marker', { cwd, writablePaths: [join(cwd, name)] }), name).rejects.toMatchObject({
            code: 'TEND_ERR_VALIDATION',
            message: expect.stringContaining('writablePaths'),
          })
        }
        // Through a symlinked parent, and with dots.
        await expect(attempt('true', { cwd, writablePaths: [join(cwd, 'home', '.ssh')] })).rejects.toMatchObject({ code: 'TEND_ERR_VALIDATION' })
        await expect(attempt('true', { cwd, writablePaths: [`${cwd}/../tend-home/spool`] })).rejects.toMatchObject({ code: 'TEND_ERR_VALIDATION' })
        expect(readFileSync(join(userHome, '.ssh', 'id_rsa'), 'utf8')).toBe(`${SSH_SECRET}\n`)
      })

      test("a cwd that contains TEND_HOME, or lies inside its spool, is refused with tend's own error", async () => {
        await expect(attempt('true', { cwd: base })).rejects.toMatchObject({ code: 'TEND_ERR_VALIDATION', message: expect.stringContaining('cwd') })
        const spoolDir = join(tendHome, 'spool', taskIds[0] ?? 'x')
        mkdirSync(spoolDir, { recursive: true })
        await expect(attempt('true', { cwd: spoolDir })).rejects.toMatchObject({ code: 'TEND_ERR_VALIDATION', message: expect.stringContaining('cwd') })
        await expect(attempt('true', { cwd: otherHome })).rejects.toMatchObject({ code: 'TEND_ERR_VALIDATION' })
      })

      test('masks follow real paths: a ~/.ssh that is a symlink to a folder elsewhere is masked there too', async () => {
        const home = join(base, 'linked-home')
        const keys = join(base, 'keys-real')
        mkdirSync(home)
        mkdirSync(keys)
        writeFileSync(join(keys, 'id_rsa'), `${SSH_SECRET}-linked\n`)
        symlinkSync(keys, join(home, '.ssh'))
        chownTree(home)
        chownTree(keys)
        const linked = await startTestDaemon({ user: daemonUser, env: { HOME: home, PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace' } })
        try {
          const started = await linked.client.start({ command: `cat ~/.ssh/id_rsa ${q(join(keys, 'id_rsa'))}; echo done`, shell: true, cwd: workspace() })
          await linked.client.wait(started.id, { timeoutMs: 20_000 })
          const output = (await linked.client.read(started.id)).data
          expect(output).toContain('done')
          expect(output).not.toContain(SSH_SECRET)
        } finally {
          await linked.stop()
        }
      })
    })

    describe('route 3: the folder a task was accepted with is the folder it runs in', () => {
      async function queueBehindBlocker(cwd: string, options: Partial<StartOptions> = {}): Promise<{ queued: Task; release: () => void }> {
        const gate = workspace()
        const blocker = await daemon.client.start({
          command: 'while [ ! -e release ]; do sleep 0.02; done',
          shell: true,
          cwd: gate,
          owner: 'toctou',
          sandbox: 'workspace',
        })
        taskIds.push(blocker.id)
        await waitFor('the blocker to run', async () => (await daemon.client.get(blocker.id)).state === 'running')
        const queued = await daemon.client.start({
          command: 'echo pwned > marker; echo ran',
          shell: true,
          cwd,
          owner: 'toctou',
          sandbox: 'workspace',
          ...options,
        })
        taskIds.push(queued.id)
        expect(queued.state).toBe('queued')
        return { queued, release: () => writeFileSync(join(gate, 'release'), '') }
      }

      test('a queued cwd swapped for a symlink before launch: the task fails, saying the folder changed', async () => {
        const parent = workspace()
        mkdirSync(join(parent, 'project'))
        const { queued, release } = await queueBehindBlocker(join(parent, 'project'))
        renameSync(join(parent, 'project'), join(parent, 'project-old'))
        symlinkSync(outside, join(parent, 'project'))
        release()
        const task = await daemon.client.wait(queued.id, { timeoutMs: 20_000 })
        expect(existsSync(join(outside, 'marker'))).toBe(false)
        expect(task.state).toBe('failed')
        expect(task.reason).toMatch(/changed since the task was accepted/)
      })

      test('a queued cwd replaced by another real folder at the same path: the task fails too', async () => {
        const parent = workspace()
        mkdirSync(join(parent, 'project'))
        const { queued, release } = await queueBehindBlocker(join(parent, 'project'))
        renameSync(join(parent, 'project'), join(parent, 'project-old'))
        mkdirSync(join(parent, 'project'))
        release()
        const task = await daemon.client.wait(queued.id, { timeoutMs: 20_000 })
        expect(task.state).toBe('failed')
        expect(task.reason).toMatch(/changed since the task was accepted/)
        expect(existsSync(join(parent, 'project', 'marker'))).toBe(false)
      })

      test('a queued writable path swapped for a symlink: the task fails', async () => {
        const cwd = workspace()
        const parent = workspace()
        mkdirSync(join(parent, 'extra'))
        const { queued, release } = await queueBehindBlocker(cwd, {
          writablePaths: [join(parent, 'extra')],
          command: `echo pwned > ${q(join(parent, 'extra', 'marker'))}`,
          shell: true,
        })
        renameSync(join(parent, 'extra'), join(parent, 'extra-old'))
        symlinkSync(outside, join(parent, 'extra'))
        release()
        const task = await daemon.client.wait(queued.id, { timeoutMs: 20_000 })
        expect(task.state).toBe('failed')
        expect(existsSync(join(outside, 'marker'))).toBe(false)
      })
    })

    describe("route 4: the task's environment stays inside the sandbox", () => {
      let library: string
      const marker = join(outside, 'ran-outside')

      beforeAll(() => {
        // Runs at load (LD_PRELOAD) and at audit start (LD_AUDIT): writing the marker only works outside the sandbox.
        const dir = workspace()
        writeFileSync(
          join(dir, 'evil.c'),
          `#include <fcntl.h>\n#include <unistd.h>\nstatic void mark(void){int fd=open("${marker}",O_WRONLY|O_CREAT|O_APPEND,0644);if(fd>=0){write(fd,"x\\n",2);close(fd);}}\n__attribute__((constructor)) static void init(void){mark();}\nunsigned int la_version(unsigned int v){mark();return v;}\n`,
        )
        library = join(dir, 'evil.so')
        execFileSync('cc', ['-shared', '-fPIC', '-o', library, join(dir, 'evil.c')])
        chownTree(dir)
      })

      test.each(['LD_PRELOAD', 'LD_AUDIT'])('--env %s=./evil.so runs nothing outside the sandbox', async (variable) => {
        const { task } = await attempt('echo inside', { env: { [variable]: library } })
        expect(task.state).toBe('exited')
        expect(existsSync(marker)).toBe(false)
      })

      test("bubblewrap's own environment and command line hold none of the task's variables", async () => {
        const cwd = workspace()
        const started = await daemon.client.start({
          command: 'echo "inside: $ROUTE4_SECRET"; while [ ! -e release ]; do sleep 0.02; done',
          shell: true,
          cwd,
          sandbox: 'workspace',
          env: { ROUTE4_SECRET: 'route4-value-5e1', GCONV_PATH: cwd },
        })
        taskIds.push(started.id)
        const running = await waitFor('the task to run', async () => {
          const task = await daemon.client.get(started.id)
          return task.state === 'running' && task.pid ? task : null
        })
        const environ = readFileSync(`/proc/${running.pid}/environ`, 'utf8')
        const cmdline = readFileSync(`/proc/${running.pid}/cmdline`, 'utf8')
        writeFileSync(join(cwd, 'release'), '')
        await daemon.client.wait(started.id, { timeoutMs: 20_000 })
        expect(environ).not.toContain('route4-value-5e1')
        expect(environ).not.toContain('GCONV_PATH')
        expect(environ).not.toContain('ROUTE4_SECRET')
        expect(cmdline).not.toContain('route4-value-5e1')
        expect((await daemon.client.read(started.id)).data).toBe('inside: route4-value-5e1\n')
      })
    })

    describe('route 5: other tend daemons', () => {
      test('a workspace task cannot start a task on another daemon of the same user', async () => {
        const marker = join(outside, 'via-other-daemon')
        const { output } = await attempt(`${postTaskLine(join(otherHome, 'tend.sock'), marker)}; echo done`)
        expect(output).toContain('done')
        expect(await other.client.list({ all: true })).toEqual([])
        expect(existsSync(marker)).toBe(false)
      })

      test("the default home and every running daemon's home are masked", async () => {
        const defaultHome = join(userHome, '.local', 'state', 'tend')
        mkdirSync(defaultHome, { recursive: true })
        writeFileSync(join(defaultHome, 'planted'), 'x')
        chownTree(join(userHome, '.local'))
        const { output } = await attempt(`ls -A ${q(otherHome)} ${q(defaultHome)} | sed 's/^/listed: /'; echo done`)
        expect(output).toContain('done')
        expect(output).not.toMatch(/listed: (tend\.sock|planted|spool|daemon\.log)/)
      })

      test('a daemon started after this one has run tasks is masked from its very next task', async () => {
        // The daemon keeps what it read of a registry that has settled (unchanged for a second): let it
        // settle, have a task read it, register a newcomer, let the registry settle again. The
        // newcomer's home must be masked all the same.
        // The registry is the daemons' user's (its place depends on the uid, not on HOME).
        const passwdHome = execFileSync('getent', ['passwd', String(owner.uid)], { encoding: 'utf8' }).split(':')[5]!
        const registry = homeRegistryDir({ uid: owner.uid, passwdHome })
        // Every root daemon of the machine (other suites' too) changes it as it starts and stops: a quiet second can take a while.
        const settled = () => waitFor('the registry of daemon homes unchanged for over a second', () => Date.now() - statSync(registry).mtimeMs > 1500, 60_000)
        await settled()
        await attempt('true')
        const lateHome = join(base, 'late-home')
        mkdirSync(lateHome)
        const late = await startTestDaemon({ user: daemonUser, home: lateHome, env: { HOME: userHome, PATH: SYSTEM_PATH, TEND_SANDBOX: 'off' } })
        try {
          await settled()
          const marker = join(outside, 'via-late-daemon')
          const { output } = await attempt(`ls -A ${q(lateHome)} | sed 's/^/listed: /'; ${postTaskLine(join(lateHome, 'tend.sock'), marker)}; echo done`)
          expect(output).toContain('done')
          expect(output).not.toMatch(/listed: (tend\.sock|spool|daemon\.log)/)
          expect(await late.client.list({ all: true })).toEqual([])
          expect(existsSync(marker)).toBe(false)
        } finally {
          await late.stop()
        }
      })
    })

    describe('what is merely unbounded', () => {
      test('/dev/shm is capped like /tmp, and /dev itself is not scratch space', async () => {
        const { output } = await attempt(
          ['head -c 16M /dev/zero > /dev/shm/fill; echo "shm rc=$?"', 'head -c 1M /dev/zero > /dev/fill && echo ESCAPED-dev', 'echo done'].join('; '),
        )
        expect(output).toContain('shm rc=1')
        expect(output).not.toContain('ESCAPED')
        expect(output).toContain('done\n')
      })

      test('a task that ptrace-stops its sandbox init still times out, and can still be killed', async () => {
        const program = [
          'import ctypes, os, sys, time',
          'libc = ctypes.CDLL(None, use_errno=True)',
          "print('attach init:', libc.ptrace(16, 1, 0, 0), flush=True)",
          'time.sleep(600)',
        ].join('\n')
        const timedOut = await attempt(`${PYTHON} -c ${q(program)}`, { timeoutMs: 1500 })
        expect(timedOut.task.state).toBe('timed_out')
        const started = await daemon.client.start({ command: `${PYTHON} -c ${q(program)}`, shell: true, cwd: workspace(), sandbox: 'workspace' })
        taskIds.push(started.id)
        await waitFor('the init to be attached', async () => (await daemon.client.read(started.id)).data.includes('attach init'), 30_000)
        const killed = await daemon.client.kill(started.id)
        expect(killed.state).toBe('killed')
        expect(processesWithEnv(`TEND_TASK_ID=${started.id}`).filter(isAlive)).toEqual([])
      })
    })

    describe('everyday work', () => {
      test('from a subfolder of a git work tree, git add works (the work tree root is writable)', async () => {
        const repo = workspace()
        execFileSync('git', ['init', '-q', repo])
        mkdirSync(join(repo, 'sub'))
        chownTree(repo)
        const { task, output } = await attempt('echo hi > file && git add file && git -c user.email=a@b -c user.name=a commit -qm one && echo committed', {
          cwd: join(repo, 'sub'),
        })
        expect(output).toContain('committed')
        expect(task.exitCode).toBe(0)
        expect(execFileSync('git', ['-c', 'safe.directory=*', '-C', repo, 'log', '--oneline']).toString()).toContain('one')
      })

      test('tools that cache can write ~/.cache, and the host cache is unchanged', async () => {
        const { output } = await attempt(
          'mkdir -p ~/.cache/tool && echo cached > ~/.cache/tool/x && cat ~/.cache/tool/x ~/.cache/host-tool/entry; echo new > ~/.cache/host-tool/entry; echo done',
        )
        expect(output).toContain('cached\n')
        expect(output).toContain('host cache\n')
        expect(existsSync(join(userHome, '.cache', 'tool'))).toBe(false)
        expect(readFileSync(join(userHome, '.cache', 'host-tool', 'entry'), 'utf8')).toBe('host cache\n')
        expect(readdirSync(join(userHome, '.cache'))).toEqual(['host-tool'])
      })
    })
  })
}

defineRoutes('root')
defineRoutes('non-root')
