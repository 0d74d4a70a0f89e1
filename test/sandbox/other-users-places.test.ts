import { afterAll, beforeAll, describe, expect } from 'vitest'
import { randomBytes } from 'node:crypto'
import { execFileSync, spawn } from 'node:child_process'
import {
  chmodSync,
  chownSync,
  existsSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import type { StartOptions, Task } from '../../client/index.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { startTestDaemon, stopAll, type TestDaemon, type UnprivilegedUser } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { eachSandboxedProfile, type SandboxedProfile } from '../helpers/profiles.js'
import { chownTree } from '../helpers/chown-tree.js'
import { markHome } from '../../daemon/store/home-marker.js'

/*
 * A root daemon's sandboxed task writes its folders as their owners (idmapped mounts): in a folder
 * of user X it has X's rights. So what X keeps apart must be apart from every such task, whoever
 * runs the daemon: X's home (a cwd that is or holds it), X's secret paths, X's own tend homes
 * (known only to X's registry). X here is a user made for this file, with its home in /var/tmp.
 * Every attempt runs as a real task; what it must not have done is checked on the host.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
const PYTHON = '/usr/bin/python3'

function q(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`
}

describe("another user's places, daemon as root", () => {
  const tag = randomBytes(4).toString('hex')
  const base = join('/var/tmp', `tend-places-${process.pid}-${tag}`)
  /** Holds X's home and nothing else. */
  const homes = join(base, 'homes')
  const xHome = join(homes, 'x')
  const xProject = join(xHome, 'proj')
  /** A project of X's outside its home, holding one of X's tend homes. */
  const xOuterProject = join(base, 'x-project')
  const xTendHome = join(xOuterProject, '.tendhome')
  const daemonHome = join(base, 'daemon-home')
  const userHome = join(base, 'user')
  const privateKey = `PRIVATE-KEY-${tag}`
  const ghToken = `gh-token-${tag}`
  const xOutput = `x-task-output-${tag}`
  const userName = `tpl${tag}`
  let x: UnprivilegedUser
  let daemon: TestDaemon
  let xDaemon: TestDaemon | undefined
  const taskIds: string[] = []

  function ownedByX(path: string, mode: number): void {
    chownSync(path, x.uid, x.gid)
    chmodSync(path, mode)
  }

  beforeAll(async () => {
    mkdirSync(base, { mode: 0o711 })
    chmodSync(base, 0o711)
    for (const dir of [homes, userHome]) mkdirSync(dir, { mode: 0o711 })
    execFileSync('useradd', ['--no-create-home', '--home-dir', xHome, '--shell', '/usr/sbin/nologin', '--user-group', userName])
    const [uid, gid] = ['-u', '-g'].map((flag) => Number(execFileSync('id', [flag, userName], { encoding: 'utf8' }).trim()))
    x = { name: userName, uid: uid!, gid: gid! }
    mkdirSync(xHome)
    ownedByX(xHome, 0o755)
    mkdirSync(join(xHome, '.ssh'))
    ownedByX(join(xHome, '.ssh'), 0o700)
    for (const [name, text] of [
      ['id_ed25519', `${privateKey}\n`],
      ['authorized_keys', 'ssh-ed25519 AAAA x@host\n'],
    ]) {
      writeFileSync(join(xHome, '.ssh', name!), text!)
      ownedByX(join(xHome, '.ssh', name!), 0o600)
    }
    // A credential many tools leave readable by everyone: a task must still see it empty.
    mkdirSync(join(xHome, '.config', 'gh'), { recursive: true })
    ownedByX(join(xHome, '.config'), 0o755)
    ownedByX(join(xHome, '.config', 'gh'), 0o755)
    writeFileSync(join(xHome, '.config', 'gh', 'hosts.yml'), `oauth_token: ${ghToken}\n`)
    ownedByX(join(xHome, '.config', 'gh', 'hosts.yml'), 0o644)
    mkdirSync(xProject)
    ownedByX(xProject, 0o755)
    mkdirSync(xOuterProject)
    ownedByX(xOuterProject, 0o755)
    mkdirSync(xTendHome)
    ownedByX(xTendHome, 0o700)
    writeFileSync(join(xTendHome, 'config.json'), '{"sandbox":"workspace"}\n')
    ownedByX(join(xTendHome, 'config.json'), 0o600)
    // X's daemon: its home is known to X's registry (in X's home) and by its marker, not to root's.
    xDaemon = await startTestDaemon({ user: x, home: xTendHome, env: { HOME: xHome, PATH: SYSTEM_PATH, TEND_SANDBOX: 'off' } })
    const xTask = await xDaemon.client.start({ command: ['echo', xOutput], cwd: xOuterProject, sandbox: 'off' })
    expect((await xDaemon.client.wait(xTask.id, { timeoutMs: 20_000 })).exitCode).toBe(0)
    expect(readdirSync(join(xHome, '.local', 'state', 'tend-homes')).length).toBeGreaterThan(0)
    mkdirSync(daemonHome, { mode: 0o700 })
    daemon = await startTestDaemon({ home: daemonHome, env: { HOME: userHome, PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_KILL_GRACE: '500ms' } })
    const status = await daemon.client.status()
    expect(status.sandbox.identity, 'the root daemon must run its tasks on their own identity (idmapped folders)').toMatchObject({ as: 'task' })
  })

  afterAll(async () => {
    try {
      await waitFor('no process of any task of this file left', () =>
        taskIds.every((id) => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0),
      )
    } finally {
      try {
        // X's daemon's stop removes only its tend home.
        await stopAll(daemon, xDaemon)
      } finally {
        rmSync(base, { recursive: true, force: true })
        execFileSync('userdel', [userName])
      }
    }
  })

  async function attempt(line: string, options: Partial<StartOptions> & { cwd: string }): Promise<{ task: Task; output: string }> {
    const started = await daemon.client.start({ command: line, shell: true, timeoutMs: 20_000, sandbox: 'workspace', ...options })
    taskIds.push(started.id)
    const task = await daemon.client.wait(started.id, { timeoutMs: 40_000 })
    return { task, output: (await daemon.client.read(started.id)).data }
  }

  function scratch(): string {
    const dir = join(base, `scratch-${randomBytes(3).toString('hex')}`)
    mkdirSync(dir, { mode: 0o755 })
    return dir
  }

  /** Nothing of X's changed, read on the host. */
  function expectXUntouched(): void {
    expect(readFileSync(join(xHome, '.ssh', 'authorized_keys'), 'utf8')).toBe('ssh-ed25519 AAAA x@host\n')
    expect(readFileSync(join(xTendHome, 'config.json'), 'utf8')).toBe('{"sandbox":"workspace"}\n')
    expect(existsSync(join(xHome, 'planted'))).toBe(false)
    expect(existsSync(join(xOuterProject, 'planted'))).toBe(false)
  }

  const eachProfile = (title: string, body: (sandbox: SandboxedProfile) => Promise<void>) => eachSandboxedProfile(title, () => daemon.client, body)
  const steal = `cat .ssh/id_ed25519 .tendhome/spool/*/output.log 2>&1; echo pwned >> .ssh/authorized_keys; echo '{"sandbox":"off"}' > .tendhome/config.json; echo planted > planted; echo done`

  eachProfile("a cwd or writable path that is or holds a user's home is refused", async (sandbox) => {
    const attempts: Array<[string, Partial<StartOptions> & { cwd: string }]> = [
      ['cwd is the home', { cwd: xHome }],
      ['cwd holds the home', { cwd: homes }],
      ['writable path is the home', { cwd: scratch(), writablePaths: [xHome] }],
      ['writable path holds the home', { cwd: scratch(), writablePaths: [homes] }],
    ]
    for (const [label, options] of attempts) {
      await expect(attempt(steal, { ...options, sandbox }), label).rejects.toMatchObject({
        code: 'TEND_ERR_VALIDATION',
        message: expect.stringContaining(`the home of ${userName}`),
      })
    }
    expectXUntouched()
  })

  eachProfile("a cwd or writable path that is, holds or lies in a user's secret path is refused", async (sandbox) => {
    const attempts: Array<[string, Partial<StartOptions> & { cwd: string }]> = [
      ['cwd is ~/.ssh', { cwd: join(xHome, '.ssh') }],
      ['cwd holds ~/.config/gh', { cwd: join(xHome, '.config') }],
      ['writable path is ~/.ssh', { cwd: scratch(), writablePaths: [join(xHome, '.ssh')] }],
    ]
    for (const [label, options] of attempts) {
      await expect(attempt(steal, { ...options, sandbox }), label).rejects.toMatchObject({
        code: 'TEND_ERR_VALIDATION',
        message: expect.stringContaining('secret path'),
      })
    }
    expectXUntouched()
  })

  eachProfile("a cwd or writable path that holds another user's tend home (known only to that user's registry) is refused", async (sandbox) => {
    for (const options of [{ cwd: xOuterProject }, { cwd: scratch(), writablePaths: [xOuterProject] }]) {
      await expect(attempt(steal, { ...options, sandbox }), JSON.stringify(options)).rejects.toMatchObject({
        code: 'TEND_ERR_VALIDATION',
        message: expect.stringContaining('a tend home'),
      })
    }
    expectXUntouched()
  })

  eachProfile("a project inside a user's home works, and the user's secret paths are empty to it", async (sandbox) => {
    const { task, output } = await attempt(
      `cat ../.ssh/id_ed25519 ../.config/gh/hosts.yml ${q(join(xHome, '.config', 'gh', 'hosts.yml'))} 2>/dev/null; echo pwned >> ../.ssh/authorized_keys 2>/dev/null; echo made > made-${sandbox}; echo done`,
      { cwd: xProject, sandbox },
    )
    expect(output, task.reason ?? '').toContain('done\n')
    expect(output).not.toContain(privateKey)
    expect(output).not.toContain(ghToken)
    // What it made in X's project is X's, on the host.
    expect(lstatSync(join(xProject, `made-${sandbox}`)).uid).toBe(x.uid)
    expectXUntouched()
  })

  eachProfile(
    "entries a user writes in its own registry (a path through a file, a FIFO, a huge file) cost the daemon nothing: tasks are still accepted, and that user's homes still refused",
    async (sandbox) => {
      const registry = join(xHome, '.local', 'state', 'tend-homes')
      const planted = [
        join(registry, `planted-${sandbox}-through-a-file.json`),
        join(registry, `planted-${sandbox}-fifo.json`),
        join(registry, `planted-${sandbox}-huge.json`),
      ]
      writeFileSync(planted[0]!, JSON.stringify({ home: '/etc/passwd/inside', pid: 1 }))
      execFileSync('mkfifo', [planted[1]!])
      writeFileSync(planted[2]!, `{"home":"/var/tmp","pid":1,"pad":"${'x'.repeat(1024 * 1024)}"}`)
      for (const path of planted) chownSync(path, x.uid, x.gid)
      try {
        // The registry changed just now: it is read again for this task.
        const { task, output } = await attempt('echo done', { cwd: scratch(), sandbox })
        expect(output, task.reason ?? '').toBe('done\n')
        await expect(attempt(steal, { cwd: xOuterProject, sandbox })).rejects.toMatchObject({
          code: 'TEND_ERR_VALIDATION',
          message: expect.stringContaining('a tend home'),
        })
      } finally {
        for (const path of planted) rmSync(path, { force: true })
      }
      expectXUntouched()
    },
  )

  eachProfile('a tend home of another user that comes and goes as tasks start (closed to them anyway) makes none of them fail', async (sandbox) => {
    // A second home of X's, in a project of X's: marked, listed in X's registry, 0700 (no task of this daemon may enter it).
    const project = join(base, `x-flip-${sandbox}`)
    mkdirSync(project, { mode: 0o755 })
    const flipping = join(project, 'home')
    mkdirSync(flipping, { mode: 0o700 })
    markHome(flipping)
    chownTree(project, x)
    const registry = join(xHome, '.local', 'state', 'tend-homes')
    const entry = join(registry, `flip-${sandbox}.json`)
    writeFileSync(entry, JSON.stringify({ home: flipping, pid: 1 }))
    chownSync(entry, x.uid, x.gid)
    let flipper: ReturnType<typeof spawn> | undefined
    try {
      // The daemon knows it (the project around it is refused), from a registry read while it was there.
      await waitFor(
        'the second home known to the daemon',
        () =>
          attempt('true', { cwd: project, sandbox }).then(
            () => false,
            (error: { message?: string }) => error.message?.includes(`contains ${flipping}, a tend home`),
          ),
        20_000,
      )
      await waitFor("X's registry unchanged long enough to be kept as read", () => Date.now() - statSync(registry).ctimeMs > 1500, 5000)
      // X renames it away and back, again and again: as a task starts, it may be there or not.
      flipper = spawn(
        PYTHON,
        [
          '-c',
          `import os, time\nwhile True:\n    os.rename(${JSON.stringify(flipping)}, ${JSON.stringify(`${flipping}.away`)})\n    time.sleep(0.0005)\n    os.rename(${JSON.stringify(`${flipping}.away`)}, ${JSON.stringify(flipping)})\n    time.sleep(0.0005)\n`,
        ],
        { stdio: 'ignore' },
      )
      const cwd = scratch()
      for (let round = 0; round < 20; round++) {
        const { task, output } = await attempt('echo done', { cwd, sandbox })
        expect(output, `task ${round}: ${task.state} ${task.reason ?? ''}`).toBe('done\n')
      }
    } finally {
      if (flipper) {
        const exited = new Promise((resolveExit) => flipper!.once('exit', resolveExit))
        flipper.kill('SIGKILL')
        await exited
      }
      rmSync(entry, { force: true })
      rmSync(project, { recursive: true, force: true })
    }
  })

  eachProfile(
    "a user's home removed and swapped for a link in a loop as tasks start one after another: every task runs, the link's target is never hidden, and the secret path in the home is hidden while it exists",
    async (sandbox) => {
      const suffix = randomBytes(3).toString('hex')
      const name = `tps${suffix}`
      // The user's own folder holds its home: it may remove the home and put a link in its place.
      const parent = join(base, `swap-${sandbox}-${suffix}`)
      const home = join(parent, 'home')
      const generation = join(parent, 'generation')
      const stop = join(parent, 'stop')
      // Where the link leads: root's, readable by every task (its ~/.ssh as well).
      const target = scratch()
      mkdirSync(join(target, '.ssh'), { mode: 0o755 })
      writeFileSync(join(target, '.ssh', 'id_ed25519'), `PUBLIC-${suffix}\n`, { mode: 0o644 })
      const secret = (made: number) => `SECRET-${suffix}-${made}`
      execFileSync('useradd', ['--no-create-home', '--home-dir', home, '--shell', '/usr/sbin/nologin', '--user-group', name])
      let swapper: ReturnType<typeof spawn> | undefined
      try {
        const [uid, gid] = ['-u', '-g'].map((flag) => Number(execFileSync('id', [flag, name], { encoding: 'utf8' }).trim()))
        const user = { name, uid: uid!, gid: gid! }
        mkdirSync(parent, { mode: 0o755 })
        // Generation 0, as the user would have it: a world-readable ~/.ssh (needed by no one, masked all the same).
        mkdirSync(join(home, '.ssh'), { recursive: true, mode: 0o755 })
        writeFileSync(join(home, '.ssh', 'id_ed25519'), `${secret(0)}\n`, { mode: 0o644 })
        chownTree(parent, user)
        await waitFor(
          'the new home known to the daemon',
          () =>
            attempt('true', { cwd: home, sandbox }).then(
              () => false,
              (error: { message?: string }) => error.message?.includes(`the home of ${name}`),
            ),
          20_000,
        )
        // The user, as itself: the home goes, a link to root's folder takes its place, then a new
        // home with a new secret (its generation, counted once it is there). On `stop` it ends with a home.
        const loop = [
          'import os, shutil, sys, time',
          'home, target, generation, stop, tag = sys.argv[1:]',
          'os.umask(0o022)',
          'made = 0',
          'while True:',
          '    shutil.rmtree(home)',
          '    time.sleep(0.0005)',
          '    os.symlink(target, home)',
          '    time.sleep(0.0005)',
          '    os.unlink(home)',
          '    made += 1',
          "    os.makedirs(home + '/.ssh')",
          "    with open(home + '/.ssh/id_ed25519', 'w') as f: f.write(f'SECRET-{tag}-{made}\\n')",
          "    with open(generation + '.new', 'w') as f: f.write(str(made))",
          "    os.rename(generation + '.new', generation)",
          '    if os.path.exists(stop): break',
          '    time.sleep(0.0005)',
        ].join('\n')
        swapper = spawn(PYTHON, ['-c', loop, home, target, generation, stop, suffix], { stdio: ['ignore', 'ignore', 'inherit'], uid: user.uid, gid: user.gid })
        const swapped = new Promise<number | null>((resolveExit) => swapper!.once('exit', resolveExit))
        await waitFor('the loop to swap the home', () => existsSync(generation), 10_000)
        const cwd = scratch()
        const line = `cat ${q(join(target, '.ssh', 'id_ed25519'))}; cat ${q(join(home, '.ssh', 'id_ed25519'))} 2>/dev/null; echo done`
        for (let round = 0; round < 24; round++) {
          // A secret made before the task was asked for is hidden from it, or gone before it starts: never read.
          const before = Number(readFileSync(generation, 'utf8'))
          const { task, output } = await attempt(line, { cwd, sandbox })
          const said = `task ${round}: ${task.state} exit ${task.exitCode} ${task.reason ?? ''}: ${output}`
          expect(task, said).toMatchObject({ state: 'exited', exitCode: 0 })
          expect(output.startsWith(`PUBLIC-${suffix}\n`), said).toBe(true)
          expect(output.endsWith('done\n'), said).toBe(true)
          const read = [...output.matchAll(new RegExp(`SECRET-${suffix}-(\\d+)`, 'g'))].map((match) => Number(match[1]))
          expect(
            read.filter((made) => made <= before),
            `${said} (generation ${before} when asked)`,
          ).toEqual([])
        }
        writeFileSync(stop, '')
        expect(await swapped).toBe(0)
        swapper = undefined
        // The home as the loop left it: its secret is hidden, the link's target still read.
        const last = Number(readFileSync(generation, 'utf8'))
        expect(readFileSync(join(home, '.ssh', 'id_ed25519'), 'utf8')).toBe(`${secret(last)}\n`)
        const { task, output } = await attempt(`${line}; ls -A ${q(join(home, '.ssh'))}`, { cwd, sandbox })
        expect(output, task.reason ?? '').toBe(`PUBLIC-${suffix}\ndone\n`)
      } finally {
        if (swapper) {
          const exited = new Promise((resolveExit) => swapper!.once('exit', resolveExit))
          swapper.kill('SIGKILL')
          await exited
        }
        rmSync(parent, { recursive: true, force: true })
        execFileSync('userdel', [name])
      }
    },
  )

  eachProfile('with taskUser, the tasks run as that user: its secret paths are empty to them, and its home is refused', async (sandbox) => {
    const asX = await startTestDaemon({
      home: join(base, `task-user-${sandbox}`),
      env: { HOME: userHome, PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_TASK_USER: userName },
    })
    try {
      expect((await asX.client.status()).sandbox.identity).toMatchObject({ as: 'taskUser', uid: x.uid })
      const started = await asX.client.start({
        command: `cat ${q(join(xHome, '.ssh', 'id_ed25519'))} ${q(join(xHome, '.config', 'gh', 'hosts.yml'))} 2>&1; echo done`,
        shell: true,
        cwd: xProject,
        sandbox,
        timeoutMs: 20_000,
      })
      taskIds.push(started.id)
      const task = await asX.client.wait(started.id, { timeoutMs: 40_000 })
      const output = (await asX.client.read(started.id)).data
      expect(output, task.reason ?? '').toContain('done\n')
      expect(output).not.toContain(privateKey)
      expect(output).not.toContain(ghToken)
      await expect(asX.client.start({ command: steal, shell: true, cwd: xHome, sandbox })).rejects.toMatchObject({
        code: 'TEND_ERR_VALIDATION',
        message: expect.stringContaining(`the home of ${userName}`),
      })
    } finally {
      await asX.stop()
    }
    expectXUntouched()
  })

  eachProfile(
    "links a user plants in its home protect only that user's own places: /, /usr and other folders it points them at stay usable",
    async (sandbox) => {
      const suffix = randomBytes(3).toString('hex')
      const zName = `tpz${suffix}`
      const wName = `tpw${suffix}`
      const zHome = join(homes, `z-${suffix}`)
      // W's home lies in a folder anyone may write (sticky, as /var/tmp): W made it a link before it existed.
      const sticky = join(base, `sticky-${suffix}`)
      const wHome = join(sticky, 'w')
      // Projects of root's that Z and W point their links at.
      const victims = { secret: scratch(), parent: scratch(), registry: scratch(), home: scratch() }
      mkdirSync(join(victims.parent, 'gh'))
      const zToken = `z-gnupg-${tag}-${suffix}`
      const made: string[] = []
      const ids = (name: string) => ({
        uid: Number(execFileSync('id', ['-u', name], { encoding: 'utf8' })),
        gid: Number(execFileSync('id', ['-g', name], { encoding: 'utf8' })),
      })
      execFileSync('useradd', ['--no-create-home', '--home-dir', zHome, '--shell', '/usr/sbin/nologin', '--user-group', zName])
      made.push(zName)
      try {
        execFileSync('useradd', ['--no-create-home', '--home-dir', wHome, '--shell', '/usr/sbin/nologin', '--user-group', wName])
        made.push(wName)
        const z = ids(zName)
        const w = ids(wName)
        const asZ = (path: string) => lchownSync(path, z.uid, z.gid)
        mkdirSync(zHome, { mode: 0o755 })
        asZ(zHome)
        mkdirSync(join(zHome, '.local', 'state'), { recursive: true })
        asZ(join(zHome, '.local'))
        asZ(join(zHome, '.local', 'state'))
        const links: Array<[string, string]> = [
          ['.kube', '/'],
          ['.docker', '/usr'],
          ['.aws', victims.secret],
          ['.config', victims.parent],
          [join('.local', 'state', 'tend-homes'), victims.registry],
        ]
        for (const [relative, target] of links) {
          symlinkSync(target, join(zHome, relative))
          asZ(join(zHome, relative))
        }
        // Z's own secret, through a link of its own into its home: still its secret.
        mkdirSync(join(zHome, 'dotfiles', 'gnupg'), { recursive: true })
        for (const dir of ['dotfiles', join('dotfiles', 'gnupg')]) asZ(join(zHome, dir))
        writeFileSync(join(zHome, 'dotfiles', 'gnupg', 'pubring'), `${zToken}\n`, { mode: 0o644 })
        asZ(join(zHome, 'dotfiles', 'gnupg', 'pubring'))
        symlinkSync(join('dotfiles', 'gnupg'), join(zHome, '.gnupg'))
        asZ(join(zHome, '.gnupg'))
        mkdirSync(sticky, { mode: 0o1777 })
        chmodSync(sticky, 0o1777)
        symlinkSync(victims.home, wHome)
        lchownSync(wHome, w.uid, w.gid)

        for (const [label, cwd] of Object.entries(victims)) {
          const { task, output } = await attempt(`ls /usr/bin/env && echo made > made-${sandbox}; echo done`, { cwd, sandbox })
          expect(output, `${label}: ${task.reason ?? ''}`).toBe('/usr/bin/env\ndone\n')
          expect(existsSync(join(cwd, `made-${sandbox}`)), label).toBe(true)
        }
        const { task, output } = await attempt(`cat ${q(join(zHome, 'dotfiles', 'gnupg', 'pubring'))} 2>&1; echo done`, { cwd: scratch(), sandbox })
        expect(output, task.reason ?? '').toContain('done\n')
        expect(output).not.toContain(zToken)
        await expect(attempt('echo planted > planted', { cwd: join(zHome, 'dotfiles', 'gnupg'), sandbox })).rejects.toMatchObject({
          code: 'TEND_ERR_VALIDATION',
          message: expect.stringContaining(`a secret path of ${zName}`),
        })
        expect(existsSync(join(zHome, 'dotfiles', 'gnupg', 'planted'))).toBe(false)
      } finally {
        for (const name of made) execFileSync('userdel', [name])
      }
    },
  )

  eachProfile('a cwd or writable path in /var/spool (cron and at run the jobs there as their owner) is refused', async (sandbox) => {
    const spool = join('/var/spool', `tend-places-${tag}-${sandbox}`)
    mkdirSync(spool, { mode: 0o755 })
    try {
      for (const options of [{ cwd: spool }, { cwd: scratch(), writablePaths: [spool] }]) {
        await expect(attempt('echo job > planted; echo done', { ...options, sandbox }), JSON.stringify(options)).rejects.toMatchObject({
          code: 'TEND_ERR_VALIDATION',
          message: expect.stringContaining('a system folder'),
        })
      }
      expect(existsSync(join(spool, 'planted'))).toBe(false)
    } finally {
      rmSync(spool, { recursive: true, force: true })
    }
  })

  eachProfile("a user's world-readable secret is empty to a task anywhere", async (sandbox) => {
    const { output } = await attempt(`cat ${q(join(xHome, '.config', 'gh', 'hosts.yml'))} 2>&1; echo done`, { cwd: scratch(), sandbox })
    expect(output).toContain('done\n')
    expect(output).not.toContain(ghToken)
  })
})
