import { afterAll, describe, expect, test } from 'vitest'
import { spawnSync } from 'node:child_process'
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runCli } from '../helpers/cli.js'
import { createTempHome, daemonEnv, killEverythingOf, startTestDaemon, stopKeepingHome, type TestDaemon } from '../helpers/test-daemon.js'

/*
 * Issue 25, round 2: the home's own files (spool-reserve, submissions.log, daemon.log, daemon.pid,
 * daemon.stderr), which a task under `off` (the daemon's uid: root for a root daemon) can replace
 * by a folder, a FIFO or a symbolic link. Each is moved aside (`<name>.<random>.displaced`) and
 * made anew: never followed, never waited on, never a wedge. The test plants them itself, as root,
 * exactly as such a task would.
 */

function run(command: string, args: string[]): void {
  const result = spawnSync(command, args, { encoding: 'utf8' })
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed (${result.status}): ${result.stderr}${result.error?.message ?? ''}`)
}

/** A FIFO at `path`, whatever was there. */
function plantFifo(path: string): void {
  rmSync(path, { recursive: true, force: true })
  run('mkfifo', ['-m', '0600', path])
}

/** A folder (not empty) at `path`, whatever was there. */
function plantFolder(path: string): void {
  rmSync(path, { recursive: true, force: true })
  mkdirSync(join(path, 'inside'), { recursive: true })
}

/** A symbolic link at `path` to a file of the daemon's that must stay as it is. */
function plantLink(path: string, victim: string): void {
  rmSync(path, { recursive: true, force: true })
  writeFileSync(victim, 'SECRET\n', { mode: 0o600 })
  symlinkSync(victim, path)
}

const displacedOf = (home: string, name: string) => readdirSync(home).filter((entry) => entry.startsWith(`${name}.`) && entry.endsWith('.displaced'))

const homes: string[] = []
const newHome = () => {
  const home = createTempHome()
  homes.push(home)
  return home
}
const mounts: string[] = []

afterAll(async () => {
  for (const mount of mounts) spawnSync('umount', ['-l', mount])
  for (const mount of mounts) rmSync(mount, { recursive: true, force: true })
  for (const home of homes) {
    await killEverythingOf(home)
    rmSync(home, { recursive: true, force: true })
  }
})

describe('F1: spool-reserve replaced', () => {
  for (const kind of ['folder', 'fifo', 'link'] as const) {
    test(`a ${kind} at spool-reserve is moved aside, the reserve made, and new tasks admitted`, async () => {
      const home = newHome()
      const reserve = join(home, 'spool-reserve')
      const victim = join(home, 'victim')
      const first = await startTestDaemon({ home, env: { TEND_SPOOL_RESERVE: '256k' } })
      await stopKeepingHome(first)
      if (kind === 'folder') plantFolder(reserve)
      else if (kind === 'fifo') plantFifo(reserve)
      else plantLink(reserve, victim)
      const daemon = await startTestDaemon({ home, env: { TEND_SPOOL_RESERVE: '256k' } })
      try {
        const ran = await runCli(['run', '--sandbox', 'off', '--', 'echo', 'hi'], daemon.env)
        expect(ran.stderr).toBe('')
        expect(ran.exitCode).toBe(0)
        const info = lstatSync(reserve)
        expect(info.isFile()).toBe(true)
        expect(info.size).toBe(256 * 1024)
        expect(displacedOf(home, 'spool-reserve')).toHaveLength(1)
        if (kind === 'link') expect(readFileSync(victim, 'utf8')).toBe('SECRET\n')
      } finally {
        await stopKeepingHome(daemon)
      }
    })
  }
})

describe('F2: submissions.log replaced', () => {
  for (const kind of ['folder', 'fifo'] as const) {
    test(`a ${kind} at submissions.log: a retry after rm and a restart is answered 410, never run again`, async () => {
      const home = newHome()
      const index = join(home, 'submissions.log')
      const work = mkdtempSync(join(tmpdir(), 'tend-home-files-work-'))
      homes.push(work)
      const marks = join(work, 'runs')
      const request = { command: `echo ran >> ${marks}`, shell: true, cwd: work, timeoutMs: 30_000, idempotencyKey: `key-${kind}` }
      const first = await startTestDaemon({ home })
      const task = await first.client.start(request)
      await first.client.wait(task.id, { timeoutMs: 20_000 })
      if (kind === 'folder') plantFolder(index)
      else plantFifo(index)
      await first.client.remove(task.id)
      await stopKeepingHome(first)
      const second = await startTestDaemon({ home })
      try {
        await expect(second.client.start(request)).rejects.toMatchObject({ code: 'TEND_ERR_SUBMISSION_REMOVED' })
        expect(readFileSync(marks, 'utf8')).toBe('ran\n')
        expect(lstatSync(index).isFile()).toBe(true)
      } finally {
        await stopKeepingHome(second)
      }
    })
  }
})

describe('F2: submissions.log replaced before the daemon starts', () => {
  test('a FIFO there never blocks the start; it is moved aside and the next key lands in a new file', async () => {
    const home = newHome()
    const index = join(home, 'submissions.log')
    plantFifo(index)
    const daemon = await startTestDaemon({ home })
    try {
      const task = await daemon.client.start({ command: 'true', shell: true, idempotencyKey: 'key-at-start' })
      await daemon.client.wait(task.id, { timeoutMs: 20_000 })
      await daemon.client.remove(task.id)
      expect(lstatSync(index).isFile()).toBe(true)
      expect(readFileSync(index, 'utf8')).toContain('key-at-start')
      expect(displacedOf(home, 'submissions.log')).toHaveLength(1)
    } finally {
      await stopKeepingHome(daemon)
    }
  })
})

describe('F4: daemon.log replaced', () => {
  test('a FIFO at daemon.log: the daemon starts, logs into a fresh file, and stops on SIGTERM', async () => {
    const home = newHome()
    plantFifo(join(home, 'daemon.log'))
    const daemon = await startTestDaemon({ home })
    await stopKeepingHome(daemon)
    expect(lstatSync(join(home, 'daemon.log')).isFile()).toBe(true)
    expect(readFileSync(join(home, 'daemon.log'), 'utf8')).toContain('daemon started')
    expect(displacedOf(home, 'daemon.log')).toHaveLength(1)
  })

  test('a symbolic link at daemon.log is never written through', async () => {
    const home = newHome()
    const victim = join(home, 'victim')
    plantLink(join(home, 'daemon.log'), victim)
    const daemon = await startTestDaemon({ home })
    await stopKeepingHome(daemon)
    expect(readFileSync(victim, 'utf8')).toBe('SECRET\n')
    expect(lstatSync(join(home, 'daemon.log')).isFile()).toBe(true)
    expect(readFileSync(join(home, 'daemon.log'), 'utf8')).toContain('daemon started')
  })

  test('a daemon.log owned by another user is moved aside, not appended to', async () => {
    const home = newHome()
    const log = join(home, 'daemon.log')
    writeFileSync(log, 'THEIRS\n', { mode: 0o666 })
    run('chown', ['65534:65534', log])
    const daemon = await startTestDaemon({ home })
    await stopKeepingHome(daemon)
    expect(statSync(log).uid).toBe(process.getuid!())
    expect(readFileSync(log, 'utf8')).not.toContain('THEIRS')
    const [aside] = displacedOf(home, 'daemon.log')
    expect(readFileSync(join(home, aside!), 'utf8')).toBe('THEIRS\n')
  })
})

describe('F5: daemon.pid replaced', () => {
  test('a folder at daemon.pid: the daemon starts and writes its pid file', async () => {
    const home = newHome()
    plantFolder(join(home, 'daemon.pid'))
    const daemon = await startTestDaemon({ home })
    try {
      expect(readFileSync(join(home, 'daemon.pid'), 'utf8')).toBe(`${daemon.process.pid}\n`)
    } finally {
      await stopKeepingHome(daemon)
    }
  })
})

describe('F6: daemon.stderr replaced (the CLI starts the daemon)', () => {
  const stopCliDaemon = async (env: Record<string, string>) => {
    const stopped = await runCli(['stop'], env)
    expect(stopped.exitCode).toBe(0)
  }

  test('a FIFO at daemon.stderr: tend status starts a daemon and answers', async () => {
    const home = newHome()
    const env = daemonEnv(home)
    plantFifo(join(home, 'daemon.stderr'))
    const status = await runCli(['status'], env, { timeoutMs: 20_000 })
    try {
      expect(status.stderr).toBe('')
      expect(status.exitCode).toBe(0)
      expect(lstatSync(join(home, 'daemon.stderr')).isFile()).toBe(true)
    } finally {
      await stopCliDaemon(env)
    }
  })

  test('a symbolic link at daemon.stderr: its target is never emptied', async () => {
    const home = newHome()
    const env = daemonEnv(home)
    const victim = join(home, 'victim')
    plantLink(join(home, 'daemon.stderr'), victim)
    const status = await runCli(['status'], env, { timeoutMs: 20_000 })
    try {
      expect(status.exitCode).toBe(0)
      expect(readFileSync(victim, 'utf8')).toBe('SECRET\n')
    } finally {
      await stopCliDaemon(env)
    }
  })
})

describe('F10: a read-only home', () => {
  test('tend daemon and the auto-start name the read-only home, exit 3, no stack', async () => {
    if (process.getuid?.() !== 0) throw new Error(`this test mounts a read-only tmpfs and needs root (uid ${process.getuid?.()})`)
    const mount = mkdtempSync(join(tmpdir(), 'tend-home-ro-'))
    run('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'tmpfs', mount])
    mounts.push(mount)
    const home = join(mount, 'home')
    mkdirSync(home, { mode: 0o700 })
    run('mount', ['-o', 'remount,ro', mount])
    const env = daemonEnv(home)
    const daemon = await runCli(['daemon'], env, { timeoutMs: 20_000 })
    expect(daemon.exitCode).toBe(3)
    expect(daemon.stderr).toContain(`the daemon cannot write its home ${home}`)
    expect(daemon.stderr).toContain('read-only')
    expect(daemon.stderr).not.toMatch(/\n\s+at /)
    const status = await runCli(['status'], env, { timeoutMs: 20_000 })
    expect(status.exitCode).toBe(3)
    expect(status.stderr).toContain(`the daemon cannot write its home ${home}`)
    expect(status.stderr).toContain('read-only')
    expect(status.stderr).not.toContain('internal error')
    expect(existsSync(join(home, 'tend.sock'))).toBe(false)
  })
})

describe('console-tokens.json replaced', () => {
  test('a FIFO there never blocks the start; tend console makes a token into a new file', async () => {
    const home = newHome()
    const tokens = join(home, 'console-tokens.json')
    plantFifo(tokens)
    const daemon = await startTestDaemon({ home })
    try {
      const opened = await runCli(['console', '--no-open'], daemon.env, { timeoutMs: 20_000 })
      expect(opened.exitCode).toBe(0)
      expect(lstatSync(tokens).isFile()).toBe(true)
      expect(displacedOf(home, 'console-tokens.json')).toHaveLength(1)
    } finally {
      await runCli(['console', '--stop'], daemon.env).catch(() => undefined)
      await stopKeepingHome(daemon)
    }
  })
})
