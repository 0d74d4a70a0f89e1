import { afterEach, describe, expect, test } from 'vitest'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { createHash } from 'node:crypto'
import { chmodSync, lstatSync, mkdirSync, readdirSync, readlinkSync, renameSync, rmdirSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { socketAnswers } from '../../client/ensure-daemon.js'
import { runCli } from '../helpers/cli.js'
import { isAlive } from '../helpers/processes.js'
import { checkUnprivilegedUser, createTempHome, daemonEnv, REPO_ROOT, setprivArgs, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { lockHolder } from '../../protocol/lock-holder.js'
import { existsSync, readFileSync, rmSync } from 'node:fs'

/*
 * One daemon per home, whatever else runs on the machine: a lock nobody but the home's owner can
 * take, that meets a home under any of its names, and a socket the daemon keeps answering on.
 */

const daemons: TestDaemon[] = []
const holders: ChildProcess[] = []
const mounts: string[] = []
const groups = new Set<number>()
const folders: string[] = []
afterEach(async () => {
  for (const holder of holders.splice(0)) {
    // A holder started in its own group (flock and its sleep) is ended whole.
    if (groups.delete(holder.pid!)) {
      try {
        process.kill(-holder.pid!, 'SIGKILL')
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error
      }
    } else if (holder.exitCode === null && holder.signalCode === null) {
      holder.kill('SIGKILL')
      await new Promise<void>((resolve) => holder.once('exit', () => resolve()))
    }
  }
  for (const alias of mounts.splice(0)) {
    spawnSync('umount', [alias])
    rmdirSync(alias)
  }
  // Two daemons can share a TEND_HOME (one of a home moved aside): each stop checks that no process of it is left.
  for (const daemon of daemons) daemon.process.kill('SIGTERM')
  try {
    while (daemons.length > 0) await daemons.pop()!.stop()
  } finally {
    for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
  }
})

/** A process of `tend-test` listening on the abstract Unix socket name `\0<name>`; resolves once it listens. */
async function listenAsOtherUser(name: string): Promise<ChildProcess> {
  const user = checkUnprivilegedUser()
  const script = `require('node:net').createServer((s) => s.destroy()).listen('\\0' + process.argv[1], () => console.log('listening'))`
  const holder = spawn('setpriv', [...setprivArgs(user), '--', process.execPath, '-e', script, name], { stdio: ['ignore', 'pipe', 'pipe'], cwd: '/' })
  holders.push(holder)
  let said = ''
  holder.stdout!.on('data', (chunk: Buffer) => (said += chunk.toString()))
  holder.stderr!.on('data', (chunk: Buffer) => (said += chunk.toString()))
  await waitFor(
    `tend-test to listen on the name (it said: ${said})`,
    () => {
      if (holder.exitCode !== null) throw new Error(`the listener exited with ${holder.exitCode}: ${said}`)
      return said.includes('listening')
    },
    30_000,
  )
  return holder
}

/** Starts `sleep` as a task and waits until it runs; its id. */
async function sleeper(daemon: TestDaemon): Promise<string> {
  const task = await daemon.client.start({ command: ['sleep', '300'], cwd: '/' })
  await waitFor('the sleeper to run', async () => (await daemon.client.get(task.id)).state === 'running')
  return task.id
}

async function daemonPid(daemon: TestDaemon): Promise<number> {
  return (await daemon.client.status()).pid
}

describe('the lock is the home owner’s alone', () => {
  test('another user listening on the abstract name a home used to be locked by does not keep its daemon out', async () => {
    const home = createTempHome()
    // The name the lock once had: anyone in the network namespace could bind it first.
    await listenAsOtherUser(`tend-daemon-${createHash('sha256').update(home).digest('hex').slice(0, 32)}`)
    const daemon = await startTestDaemon({ home })
    daemons.push(daemon)
    const status = await runCli(['status'], daemon.env)
    expect(status).toMatchObject({ exitCode: 0 })
    const restart = await runCli(['restart'], daemon.env)
    expect(restart.exitCode, restart.stderr).toBe(0)
    expect(await socketAnswers(join(home, 'tend.sock'))).toBe(true)
    // The restarted daemon is not the test's child: stop it through the CLI, then the test's own is gone too.
    expect((await runCli(['stop'], daemon.env)).exitCode).toBe(0)
  })

  test('a second daemon on another name of the same home (a bind mount) is refused, and the first keeps its tasks and socket', async () => {
    const home = createTempHome()
    const alias = `${home}-alias`
    mkdirSync(alias)
    const mounted = spawnSync('mount', ['--bind', home, alias])
    expect(mounted.status, `mount --bind needs root: ${String(mounted.stderr)}`).toBe(0)
    mounts.push(alias)
    const first = await startTestDaemon({ home })
    daemons.push(first)
    const id = await sleeper(first)
    const pid = await daemonPid(first)
    const second = await runCli(['daemon'], daemonEnv(alias), { timeoutMs: 30_000 })
    expect(second.exitCode, second.stderr).toBe(3)
    expect(second.stdout + second.stderr).toContain(`pid ${pid}`)
    expect((await first.client.get(id)).state).toBe('running')
    expect(await socketAnswers(join(home, 'tend.sock'))).toBe(true)
    expect(await daemonPid(first)).toBe(pid)
  })
})

describe('the daemon keeps answering on its socket', () => {
  test('each bind again closes the listener it supersedes: fifteen removals leave the daemon as many listeners as one', async () => {
    const daemon = await startTestDaemon()
    daemons.push(daemon)
    const pid = await daemonPid(daemon)
    const socket = join(daemon.home, 'tend.sock')
    const rebind = async (round: number) => {
      unlinkSync(socket)
      // Nothing but the daemon makes the path again (its inode number may well be the old one's).
      await waitFor(`the socket to be bound again (round ${round})`, () => existsSync(socket) && socketAnswers(socket), 30_000)
    }
    await rebind(1)
    // The HTTP server's first listener (kept: closing it would end idle connections) and the current one.
    expect(listenersOf(pid, socket)).toBe(2)
    for (let round = 2; round <= 15; round++) await rebind(round)
    await waitFor('the superseded listeners to close', () => listenersOf(pid, socket) === 2)
    expect(listenersOf(pid, socket)).toBe(2)
    expect((await runCli(['status'], daemon.env)).exitCode).toBe(0)
  })

  test('a removed socket is bound again, and the CLI reaches the same daemon', async () => {
    const daemon = await startTestDaemon()
    daemons.push(daemon)
    const pid = await daemonPid(daemon)
    const task = await daemon.client.start({ command: ['sh', '-c', 'exit 4'], cwd: '/' })
    unlinkSync(join(daemon.home, 'tend.sock'))
    await waitFor('the socket to answer again', () => socketAnswers(join(daemon.home, 'tend.sock')))
    const waited = await runCli(['wait', task.id], daemon.env)
    expect(waited.exitCode, waited.stderr).toBe(4)
    expect(await daemonPid(daemon)).toBe(pid)
  })

  test('a folder put where the socket was is moved aside, and the socket bound again', async () => {
    const daemon = await startTestDaemon()
    daemons.push(daemon)
    const socket = join(daemon.home, 'tend.sock')
    unlinkSync(socket)
    mkdirSync(socket)
    await waitFor('the socket to answer again', () => socketAnswers(socket))
    expect(lstatSync(socket).isSocket()).toBe(true)
    expect(readdirSync(daemon.home).filter((name) => /^tend\.sock\.[0-9a-f]+\.displaced$/.test(name))).toHaveLength(1)
    expect((await runCli(['status'], daemon.env)).exitCode).toBe(0)
  })

  test('another process’s socket put in its place is replaced by the daemon’s own: clients reach the daemon, not it', async () => {
    const daemon = await startTestDaemon()
    daemons.push(daemon)
    const socket = join(daemon.home, 'tend.sock')
    unlinkSync(socket)
    const script = `require('node:net').createServer((s) => s.destroy()).listen(process.argv[1], () => console.log('listening'))`
    const impostor = spawn(process.execPath, ['-e', script, socket], { stdio: ['ignore', 'pipe', 'ignore'] })
    holders.push(impostor)
    let said = ''
    impostor.stdout!.on('data', (chunk: Buffer) => (said += chunk.toString()))
    await waitFor('the impostor to listen', () => said.includes('listening'))
    const impostorSocket = lstatSync(socket).ino
    // The impostor closes every connection unanswered: a status that succeeds reached the daemon.
    // Each look is a whole CLI run (a second or more on a loaded machine): the daemon looks every second.
    await waitFor('the daemon to answer on its socket', async () => (await runCli(['status'], daemon.env)).exitCode === 0, 30_000)
    expect(lstatSync(socket).ino).not.toBe(impostorSocket)
  })

  test('tend stop right after the socket was removed stops the daemon, and says so', async () => {
    const daemon = await startTestDaemon()
    daemons.push(daemon)
    const pid = await daemonPid(daemon)
    const id = await sleeper(daemon)
    unlinkSync(join(daemon.home, 'tend.sock'))
    const stop = await runCli(['stop'], daemon.env)
    expect(stop.exitCode, stop.stderr).toBe(0)
    expect(stop.stdout).toContain(`daemon stopped (pid ${pid})`)
    await waitFor('the daemon to exit', () => !isAlive(pid))
    const tasks = JSON.parse((await runCli(['ps', '--json', '--all'], daemon.env)).stdout) as Array<{ id: string; state: string }>
    expect(tasks.find((task) => task.id === id)?.state).toBe('killed')
    expect((await runCli(['stop'], daemon.env)).exitCode).toBe(0)
  })
})

describe('a lock file removed by a process of the daemon’s uid', () => {
  test('keeps no second daemon out only while it lasts: the home folder’s lock does, and the socket stays watched', async () => {
    const daemon = await startTestDaemon()
    daemons.push(daemon)
    const pid = await daemonPid(daemon)
    const lock = join(daemon.home, 'daemon.lock')
    unlinkSync(lock)
    // The new file at its name is taken first by someone else (flock(1)): the daemon cannot lock it again.
    writeFileSync(lock, '')
    chmodSync(lock, 0o600)
    const holder = spawn('flock', ['-n', lock, 'sleep', '300'], { stdio: 'ignore', detached: true })
    holders.push(holder)
    groups.add(holder.pid!)
    await waitFor('flock(1) to hold the new lock file', () => lockHolder(lock) === holder.pid)
    const second = spawnSync(process.execPath, [join(REPO_ROOT, 'bin', 'tend.js'), 'daemon'], { env: daemon.env, encoding: 'utf8', timeout: 30_000 })
    expect(second.status, second.stderr).toBe(3)
    expect(second.stderr).toContain(`pid ${pid}`)
    // Another process's socket put in its place afterwards is still replaced by the daemon's own.
    await replaceSocket(daemon)
    expect(await daemonPid(daemon)).toBe(pid)
  })

  test('a spool moved or linked into another home is still its daemon’s: no daemon starts on that home', async () => {
    const daemon = await startTestDaemon()
    daemons.push(daemon)
    const pid = await daemonPid(daemon)
    const id = await sleeper(daemon)
    const other = createTempHome()
    folders.push(other)
    const linked = createTempHome()
    folders.push(linked)
    renameSync(join(daemon.home, 'spool'), join(other, 'spool'))
    symlinkSync(join(other, 'spool'), join(linked, 'spool'))
    try {
      for (const home of [other, linked]) {
        const second = spawnSync(process.execPath, [join(REPO_ROOT, 'bin', 'tend.js'), 'daemon'], { env: daemonEnv(home), encoding: 'utf8', timeout: 30_000 })
        expect(second.status, `${home}: ${second.stderr}`).toBe(3)
        expect(second.stderr).toContain(`pid ${pid}`)
      }
    } finally {
      renameSync(join(other, 'spool'), join(daemon.home, 'spool'))
    }
    expect((await daemon.client.get(id)).state).toBe('running')
  })

  test('a removed lock file is locked again by the daemon at its name', async () => {
    const daemon = await startTestDaemon()
    daemons.push(daemon)
    const pid = await daemonPid(daemon)
    const lock = join(daemon.home, 'daemon.lock')
    const before = lstatSync(lock).ino
    unlinkSync(lock)
    await waitFor('the daemon to hold a lock file at its name again', () => existsSync(lock) && lockHolder(lock) === pid, 10_000)
    expect(lstatSync(lock).ino).not.toBe(before)
  })

  test('a home moved aside and back: the daemon stands aside meanwhile, then watches its socket again', async () => {
    const daemon = await startTestDaemon()
    daemons.push(daemon)
    const pid = await daemonPid(daemon)
    const aside = `${daemon.home}.aside`
    renameSync(daemon.home, aside)
    await waitFor('the daemon to say its home was moved', () => readFileSync(join(aside, 'daemon.log'), 'utf8').includes('its home was moved'), 30_000)
    renameSync(aside, daemon.home)
    await waitFor('the daemon to say its home is back', () => readFileSync(join(daemon.home, 'daemon.log'), 'utf8').includes('its home is back'), 30_000)
    await replaceSocket(daemon)
    expect(await daemonPid(daemon)).toBe(pid)
  })
})

/**
 * Puts another process's socket at the daemon's path: the daemon must bind its own again, and clients reach it.
 * The impostor binds beside it and is renamed over it, so the daemon never sees the path empty (it would bind
 * there first, and the impostor's bind would fail).
 */
async function replaceSocket(daemon: TestDaemon): Promise<void> {
  const socket = join(daemon.home, 'tend.sock')
  const beside = `${socket}.impostor`
  const script = `require('node:net').createServer((s) => s.destroy()).listen(process.argv[1], () => console.log('listening'))`
  const impostor = spawn(process.execPath, ['-e', script, beside], { stdio: ['ignore', 'pipe', 'pipe'] })
  holders.push(impostor)
  let said = ''
  let complained = ''
  impostor.stdout!.on('data', (chunk: Buffer) => (said += chunk.toString()))
  impostor.stderr!.on('data', (chunk: Buffer) => (complained += chunk.toString()))
  await waitFor(
    'the impostor to listen',
    () => {
      if (impostor.exitCode !== null) throw new Error(`the impostor exited with ${impostor.exitCode}: ${complained}`)
      return said.includes('listening')
    },
    30_000,
  )
  const own = lstatSync(socket).ino
  renameSync(beside, socket)
  const impostors = lstatSync(socket).ino
  expect(impostors).not.toBe(own)
  await waitFor('the daemon to answer on its socket', async () => (await runCli(['status'], daemon.env)).exitCode === 0, 30_000)
  expect(lstatSync(socket).ino).not.toBe(impostors)
}

describe('only the home’s own daemon is ever signalled', () => {
  test('a process of the user holding the lock file (flock(1)) is named and refused, never killed, by stop and by the daemon', async () => {
    const home = createTempHome()
    folders.push(home)
    const lock = join(home, 'daemon.lock')
    writeFileSync(lock, '')
    chmodSync(lock, 0o600)
    const holder = spawn('flock', ['-n', lock, 'sleep', '300'], { stdio: 'ignore', detached: true })
    holders.push(holder)
    groups.add(holder.pid!)
    await waitFor('flock to hold the lock', () => {
      if (holder.exitCode !== null) throw new Error(`flock exited with ${holder.exitCode}: is util-linux installed?`)
      return lockHolder(lock) === holder.pid
    })
    const env = daemonEnv(home)
    const stop = await runCli(['stop'], env, { timeoutMs: 30_000 })
    expect(stop.exitCode, stop.stdout + stop.stderr).toBe(3)
    expect(stop.stderr).toContain(`pid ${holder.pid}: \`flock -n ${lock} sleep 300\`, not a tend daemon`)
    expect(stop.stdout).not.toContain('daemon stopped')
    expect(isAlive(holder.pid!)).toBe(true)
    expect(lockHolder(lock)).toBe(holder.pid)
    const daemon = await runCli(['daemon'], env, { timeoutMs: 30_000 })
    expect(daemon.exitCode, daemon.stderr).toBe(3)
    expect(daemon.stderr).toContain(`(pid ${holder.pid}: \`flock -n ${lock} sleep 300\`, not a tend daemon)`)
    expect(isAlive(holder.pid!)).toBe(true)
  })
})

/** How many listening Unix sockets bound at `path` process `pid` holds open, from /proc/net/unix and its descriptors. */
function listenersOf(pid: number, path: string): number {
  const listening = new Set<string>()
  for (const line of readFileSync('/proc/net/unix', 'utf8').split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/)
    // Flags 00010000 is __SO_ACCEPTCON: a socket that listen() was called on.
    if (fields[7] === path && (parseInt(fields[3] ?? '0', 16) & 0x10000) !== 0) listening.add(fields[6]!)
  }
  let count = 0
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))
      if (match && listening.has(match[1]!)) count++
    } catch {
      // closed meanwhile
    }
  }
  return count
}

describe('a home moved aside while its daemon runs', () => {
  test('its daemon stops binding the old path once the lock file there is not its own: the new home’s daemon keeps its socket', async () => {
    const home = createTempHome()
    const old = await startTestDaemon({ home })
    daemons.push(old)
    const oldPid = await daemonPid(old)
    const aside = `${home}.old`
    renameSync(home, aside)
    mkdirSync(home, { mode: 0o700 })
    folders.push(aside)
    const fresh = await startTestDaemon({ home })
    daemons.push(fresh)
    const freshPid = await daemonPid(fresh)
    const socket = join(home, 'tend.sock')
    const oldLog = join(aside, 'daemon.log')
    await waitFor('the moved daemon to say its home was moved', () => readFileSync(oldLog, 'utf8').includes('its home was moved'), 30_000)
    // Nothing must happen any more: watched over three of the watches' periods, the path stays the new daemon's socket.
    const identity = lstatSync(socket).ino
    const rebinds = (text: string) => text.split('\n').filter((line) => line.includes('bound again')).length
    const before = { old: rebinds(readFileSync(oldLog, 'utf8')), fresh: rebinds(readFileSync(join(home, 'daemon.log'), 'utf8')) }
    const until = Date.now() + 3 * 1000
    while (Date.now() < until) {
      expect(lstatSync(socket).ino).toBe(identity)
      expect((await fresh.client.status()).pid).toBe(freshPid)
    }
    expect({ old: rebinds(readFileSync(oldLog, 'utf8')), fresh: rebinds(readFileSync(join(home, 'daemon.log'), 'utf8')) }).toEqual(before)
    expect(readFileSync(oldLog, 'utf8').split('its home was moved').length).toBe(2)
    // The moved daemon still serves its tasks on the socket it had: reached at its home's new name.
    expect(isAlive(oldPid)).toBe(true)
    const reached = await runCli(['status', '--json'], daemonEnv(aside))
    expect(reached.exitCode, reached.stderr).toBe(0)
    expect(JSON.parse(reached.stdout).pid).toBe(oldPid)
  })
})
