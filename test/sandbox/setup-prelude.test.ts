import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { randomBytes } from 'node:crypto'
import { chownSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { checkUnprivilegedUser, startTestDaemon, type TestDaemon, endSuite } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * The setup prelude (daemon/sandbox/setup-report.ts): under a daemon that is not root, a shell in
 * the sandbox says 'tend: set up', exports the task's variables from holders and execs the
 * command. A task must see what it would under a root daemon (no prelude: the spawner hides masks
 * by descriptor): the same variables, the same command, the same outcome. Each case runs the same
 * task on both.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

describe('the setup prelude under a daemon that is not root, against a root daemon (native spawner)', () => {
  const base = join('/var/tmp', `tend-adv-setup2-${process.pid}-${randomBytes(4).toString('hex')}`)
  const userHome = join(base, 'home')
  let owner: { uid: number; gid: number }
  let root: TestDaemon
  let unprivileged: TestDaemon
  const taskIds: string[] = []

  beforeAll(async () => {
    owner = checkUnprivilegedUser()
    mkdirSync(base, { mode: 0o711 })
    mkdirSync(userHome, { mode: 0o711 })
    chownSync(userHome, owner.uid, owner.gid)
    const env = { HOME: userHome, PATH: SYSTEM_PATH, TEND_SANDBOX: 'workspace', TEND_SPAWNER: 'native' }
    root = await startTestDaemon({ env })
    unprivileged = await startTestDaemon({ user: 'unprivileged', env })
  })

  afterAll(() => endSuite(taskIds, base, root, unprivileged))

  function workspace(name: string): string {
    const ws = join(base, name)
    mkdirSync(ws, { mode: 0o755 })
    chownSync(ws, owner.uid, owner.gid)
    return ws
  }

  /** Runs the task to its end on one daemon: its state, exit code, reason and output. */
  async function run(daemon: TestDaemon, options: Parameters<TestDaemon['client']['start']>[0]) {
    const started = await daemon.client.start({ sandbox: 'workspace', ...options })
    taskIds.push(started.id)
    const ended = await daemon.client.wait(started.id)
    return { state: ended.state, exitCode: ended.exitCode, reason: ended.reason, output: (await daemon.client.read(started.id)).data }
  }

  function environmentOf(output: string): Record<string, string> {
    return Object.fromEntries(
      output
        .split('\0')
        .filter((entry) => entry.length > 0)
        .map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
    )
  }

  test("the task's variables arrive exactly, names like the holders' included, nothing added", async () => {
    const ws = workspace('parity')
    const asked = {
      MULTI: 'one\ntwo\n',
      QUOTES: `'"$(id)\`id\` $HOME \\`,
      _tend0: 'mine',
      _tendn: 'also mine',
      _tendi: 'and mine',
      _tend_0: 'mine too',
      IFS: 'x',
      PS4: '+$(touch /tmp/pwned)',
      ENV: '/etc/passwd',
      LINENO: '77',
      PPID: '5',
      EMPTY: '',
    }
    const result = await run(unprivileged, { command: ['env', '-0'], cwd: ws, env: asked })
    expect(result).toMatchObject({ state: 'exited', exitCode: 0 })
    const seen = environmentOf(result.output)
    expect(Object.fromEntries(Object.keys(asked).map((key) => [key, seen[key]]))).toEqual(asked)
    const holders = Object.keys(seen).filter((key) => key.startsWith('_tend') && !(key in asked))
    expect({ holders, SHLVL: seen.SHLVL, OLDPWD: seen.OLDPWD, underscore: seen._, PWD: seen.PWD }).toEqual({
      holders: [],
      SHLVL: undefined,
      OLDPWD: undefined,
      underscore: undefined,
      PWD: ws,
    })
  })

  test('a task whose OPTIND is not a number runs under both, without the OPTIND a shell refuses under one that is not root', async () => {
    const ws = workspace('optind')
    const task = { command: ['env', '-0'], cwd: ws, env: { OPTIND: 'abc' } }
    const asRoot = await run(root, task)
    expect(asRoot).toMatchObject({ state: 'exited', exitCode: 0 })
    expect(environmentOf(asRoot.output).OPTIND).toBe('abc')
    // dash refuses OPTIND=abc ('Illegal number'): the prelude leaves that one out, and runs the command.
    const asUser = await run(unprivileged, task)
    expect({ state: asUser.state, exitCode: asUser.exitCode, output: asUser.output.includes('\0') ? 'env ran' : asUser.output }).toEqual({
      state: 'exited',
      exitCode: 0,
      output: 'env ran',
    })
    expect(environmentOf(asUser.output).OPTIND).toBeUndefined()
  })

  test("2000 variables, some named like the holders, run under both: the prelude's line does not grow with them", async () => {
    const ws = workspace('many')
    const env: Record<string, string> = { _tend0: 'mine', _tendn: 'mine', [`_tend${'_'.repeat(200)}0`]: 'mine' }
    for (let index = 0; index < 2000; index++) env[`VARIABLE_WITH_A_LONG_NAME_${index}`] = 'x'
    const task = { command: ['sh', '-c', 'echo "$VARIABLE_WITH_A_LONG_NAME_1999"'], cwd: ws, env }
    expect(await run(root, task)).toMatchObject({ state: 'exited', exitCode: 0, output: 'x\n' })
    const asUser = await run(unprivileged, task)
    expect({ state: asUser.state, exitCode: asUser.exitCode, reason: asUser.reason, output: asUser.output }).toEqual({
      state: 'exited',
      exitCode: 0,
      reason: null,
      output: 'x\n',
    })
  })

  test('a variable named like a holder with 100000 underscores neither stalls a daemon that is not root nor fails the task', async () => {
    const ws = workspace('stall')
    // The holders' base is chosen in one pass over the names (it was lengthened one '_' at a time, each
    // tried against every name: 30000 underscores held the daemon's answers 2 s and failed the task E2BIG).
    const env = { [`_tend${'_'.repeat(100_000)}i`]: 'mine', [`_tend${'_'.repeat(100_000)}`]: 'mine' }
    expect(await run(root, { command: ['true'], cwd: ws, env })).toMatchObject({ state: 'exited', exitCode: 0 })
    const task = await unprivileged.client.start({ command: ['true'], cwd: ws, sandbox: 'workspace', env })
    taskIds.push(task.id)
    // While it is launched, the daemon is asked how it is, again and again: the slowest answer is kept.
    let answeredInMs = 0
    await waitFor(
      'the task has ended',
      async () => {
        const asked = Date.now()
        await unprivileged.client.status()
        answeredInMs = Math.max(answeredInMs, Date.now() - asked)
        return ['exited', 'failed', 'killed'].includes((await unprivileged.client.get(task.id)).state) || null
      },
      60_000,
    )
    const ended = await unprivileged.client.get(task.id)
    expect({ answeredWithinOneSecond: answeredInMs < 1000, answeredInMs, state: ended.state, reason: ended.reason }).toEqual({
      answeredWithinOneSecond: true,
      answeredInMs: expect.any(Number),
      state: 'exited',
      reason: null,
    })
  })

  test('a variable of 128 KiB less its holder name runs under both (the kernel takes 128 KiB a string)', async () => {
    const ws = workspace('long')
    // Its holder's string, '_tend0=' + value + NUL, is 131072 bytes, the kernel's limit for one (MAX_ARG_STRLEN):
    // a value longer by as much as the holder's name is longer than BIG passes only without a prelude (docs/sandbox.md).
    const value = 'y'.repeat(131072 - '_tend0='.length - 1)
    const task = { command: ['sh', '-c', 'printf %s "$BIG" | wc -c'], cwd: ws, env: { BIG: value } }
    expect(await run(root, task)).toMatchObject({ state: 'exited', exitCode: 0, output: `${value.length}\n` })
    const asUser = await run(unprivileged, task)
    expect({ state: asUser.state, reason: asUser.reason, output: asUser.output }).toEqual({ state: 'exited', reason: null, output: `${value.length}\n` })
  })

  test('commands named -x, --, or with = in the name run as under a root daemon', async () => {
    const ws = workspace('names')
    const bin = join(ws, 'bin')
    mkdirSync(bin, { mode: 0o755 })
    chownSync(bin, owner.uid, owner.gid)
    for (const name of ['-x', '--', 'A=B', '-c']) writeFileSync(join(bin, name), `#!/bin/sh\nprintf '%s|' "$(basename "$0")" "$@"\n`, { mode: 0o755 })
    for (const command of [
      ['-x', '-y'],
      ['--', '--'],
      ['A=B', 'C=D'],
      ['-c', 'echo pwned'],
    ]) {
      const task = { command, cwd: ws, env: { PATH: `${bin}:${SYSTEM_PATH}` } }
      const asRoot = await run(root, task)
      const asUser = await run(unprivileged, task)
      expect({ command, state: asUser.state, exitCode: asUser.exitCode, output: asUser.output }).toEqual({
        command,
        state: asRoot.state,
        exitCode: asRoot.exitCode,
        output: asRoot.output,
      })
      expect(asRoot.output).toBe(`${command.join('|')}|`)
    }
  })

  test('a task on a pipe and a task on a terminal get their input under a daemon that is not root', async () => {
    const ws = workspace('input')
    const piped = await unprivileged.client.start({ command: ['cat'], cwd: ws, sandbox: 'workspace', stdin: 'pipe' })
    taskIds.push(piped.id)
    await unprivileged.client.input(piped.id, 'through the pipe\n', { eof: true })
    expect(await unprivileged.client.wait(piped.id)).toMatchObject({ state: 'exited', exitCode: 0 })
    expect((await unprivileged.client.read(piped.id)).data).toBe('through the pipe\n')

    // On a terminal: what the same task shows under a root daemon.
    const shown: string[] = []
    for (const daemon of [root, unprivileged]) {
      const typed = await daemon.client.start({ command: ['sh', '-c', 'tty; read line; echo "got $line"'], cwd: ws, sandbox: 'workspace', tty: true })
      taskIds.push(typed.id)
      await waitFor('the terminal task is running', async () => (await daemon.client.get(typed.id)).state === 'running' || null)
      await daemon.client.input(typed.id, 'typed\r')
      expect(await daemon.client.wait(typed.id)).toMatchObject({ state: 'exited', exitCode: 0 })
      shown.push((await daemon.client.read(typed.id)).data)
    }
    // The echo of the typed line may come before or after the tty line: each line is compared as a set.
    const lines = (text: string) => text.split('\r\n').filter(Boolean).sort()
    expect(lines(shown[1]!)).toEqual(lines(shown[0]!))
    expect(shown[1]).toContain('got typed')
  })

  test("a task's secret never shows in a world-readable command line while it starts or runs", async () => {
    const ws = workspace('secret')
    const secret = `s3cr3t-${randomBytes(12).toString('hex')}`
    const started = await unprivileged.client.start({ command: ['sleep', '120'], cwd: ws, sandbox: 'workspace', env: { TOKEN: secret } })
    taskIds.push(started.id)
    const seen = new Set<number>()
    // Watched from the start request on: the keeper, bubblewrap, the prelude shell, the command.
    await waitFor('the task is running', async () => {
      for (const entry of readdirSync('/proc')) {
        if (!/^\d+$/.test(entry)) continue
        try {
          if (readFileSync(`/proc/${entry}/cmdline`).includes(secret)) seen.add(Number(entry))
        } catch {
          // gone
        }
      }
      return (await unprivileged.client.get(started.id)).state === 'running' || null
    })
    expect([...seen]).toEqual([])
    expect((await unprivileged.client.kill(started.id)).state).toBe('killed')
  })
})
