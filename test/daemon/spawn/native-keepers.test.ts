import { describe, expect, test } from 'vitest'
import { execFileSync, spawn } from 'node:child_process'
import { constants as fsConstants, existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { constants } from 'node:os'
import { dirname, join } from 'node:path'
import { readExitFile } from '../../../daemon/spawn/exit-file.js'
import { NativeSpawner } from '../../../daemon/spawn/native-spawner.js'
import { isAlive, processesWithEnv } from '../../helpers/processes.js'
import { waitFor } from '../../helpers/wait-for.js'
import {
  binary,
  childrenOf,
  exitRecord,
  extraSpawners,
  freshDir,
  keeperGone,
  leftovers,
  procStat,
  request,
  spawner,
  started,
  startSleeper,
  unusedPid,
  useNativeSpawner,
} from './native-fixture.js'
import { KEEPER_FIGURES } from '../../helpers/exit-record.js'

/** The native spawner's keepers: the task's parent, its exit file, and attaching to one an earlier helper forked. */

useNativeSpawner()

describe('native spawner: keepers', () => {
  test("started names the keeper: the task's parent, the leader of its own session (not the helper's), with its start time", async () => {
    const child = await startSleeper()
    const keeper = child.keeper!
    const stat = procStat(keeper.pid)
    expect(Number(stat[1])).toBe(spawner.helperPid) // ppid
    expect(Number(stat[2])).toBe(keeper.pid) // process group
    expect(Number(stat[3])).toBe(keeper.pid) // session
    expect(Number(stat[19])).toBe(keeper.startTicks) // field 22: start time
    expect(Number(procStat(spawner.helperPid!)[3])).not.toBe(keeper.pid)
    expect(Number(procStat(child.pid)[1])).toBe(keeper.pid)
    expect(readFileSync(`/proc/${keeper.pid}/comm`, 'utf8')).toBe('tend-keeper\n')
  })

  test('the keeper ignores HUP, INT, QUIT, TERM, PIPE and the terminal stops, survives them, and still records the exit', async () => {
    const child = await startSleeper()
    const keeper = child.keeper!.pid
    const ignoredMask = BigInt(`0x${/^SigIgn:\s+([0-9a-f]+)$/m.exec(readFileSync(`/proc/${keeper}/status`, 'utf8'))![1]}`)
    const ignored = ['SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGTERM', 'SIGPIPE', 'SIGTSTP', 'SIGTTIN', 'SIGTTOU', 'SIGUSR1', 'SIGUSR2', 'SIGALRM'] as const
    for (const name of ignored) expect(ignoredMask & (1n << BigInt(constants.signals[name] - 1)), name).not.toBe(0n)
    for (const name of ignored) process.kill(keeper, name)
    // Had any of them ended the keeper, the exit below would read unknown, with no exit file.
    process.kill(child.pid, 'SIGTERM')
    expect(await child.exited).toEqual({ exitCode: null, signal: 'SIGTERM' })
    await keeperGone(child.keeper!)
    expect(exitRecord(child.req.exitFile)).toMatchObject({ pid: child.pid, exitCode: null, signal: 15 })
  })

  test("the keeper keeps nothing of the helper's: /dev/null on 0-2, its report channel (a socket) and the exit file's folder; its cwd is /", async () => {
    const child = await startSleeper()
    const keeper = child.keeper!.pid
    const fds = readdirSync(`/proc/${keeper}/fd`).sort((a, b) => Number(a) - Number(b))
    const targets = fds.map((fd) => readlinkSync(`/proc/${keeper}/fd/${fd}`))
    expect(targets.slice(0, 3)).toEqual(['/dev/null', '/dev/null', '/dev/null'])
    // And the output file, read-only, never read: held so that no write lease can be taken on it.
    expect(targets.slice(3).sort()).toEqual([dirname(child.req.exitFile), child.req.outputFile, expect.stringMatching(/^socket:\[\d+\]$/)].sort())
    const outputFd = fds[targets.indexOf(child.req.outputFile)]!
    const flags = parseInt(/^flags:\s+([0-7]+)$/m.exec(readFileSync(`/proc/${keeper}/fdinfo/${outputFd}`, 'utf8'))![1]!, 8)
    expect(flags & 0o3 /* O_ACCMODE */).toBe(fsConstants.O_RDONLY)
    const socket = /^socket:\[(\d+)\]$/.exec(targets.find((target) => target.startsWith('socket:'))!)![1]!
    // Its peer is a socket the helper reads, and none of the daemon's: not the helper's stdin, stdout or stderr.
    const peer = peerOfUnixSocket(socket)
    const helperFds = readdirSync(`/proc/${spawner.helperPid}/fd`).map((fd) => ({ fd, target: readlinkSync(`/proc/${spawner.helperPid}/fd/${fd}`) }))
    expect(helperFds.filter((entry) => entry.target === `socket:[${peer}]`).map((entry) => Number(entry.fd))).toEqual([expect.any(Number)])
    expect(helperFds.filter((entry) => entry.target === `socket:[${peer}]` && Number(entry.fd) < 3)).toEqual([])
    expect(readlinkSync(`/proc/${keeper}/cwd`)).toBe('/')
  })

  test("exit 3 is recorded in the exit file: one whole fixed JSON line, 0600, with the task's pid and the time it ended; no temporary file is left", async () => {
    const dir = freshDir()
    const req = request({ file: '/bin/sh', argv: ['sh', '-c', 'exit 3'], cwd: dir })
    const before = Date.now()
    const child = started(await spawner.spawn(req))
    const result = { ...(await child.exited), pid: child.pid }
    const after = Date.now()
    expect(result).toMatchObject({ exitCode: 3, signal: null })
    // Written before the exit is reported: there, whole, when `exited` settles, and nothing else in the folder.
    expect(readdirSync(dir).sort()).toEqual(['exit.json', 'output.log'])
    const text = readFileSync(req.exitFile, 'utf8')
    expect(text).toMatch(/^\{[^\n]*\}\n$/)
    const record = JSON.parse(text) as { endedAtMs: number }
    expect(record).toEqual({
      v: 2,
      pid: result.pid,
      exitCode: 3,
      signal: null,
      endedAtMs: expect.any(Number),
      endedBy: 'itself',
      outputLostBytes: 0,
      ...KEEPER_FIGURES,
    })
    expect(record.endedAtMs).toBeGreaterThanOrEqual(before)
    expect(record.endedAtMs).toBeLessThanOrEqual(after)
    expect(statSync(req.exitFile).mode & 0o777).toBe(0o600)
    await keeperGone(child.keeper!)
    expect(readdirSync(dir).sort()).toEqual(['exit.json', 'output.log'])
    expect(readExitFile(req.exitFile)).toEqual({
      pid: result.pid,
      exitCode: 3,
      signal: null,
      endedAt: new Date(record.endedAtMs).toISOString(),
      usage: KEEPER_FIGURES,
    })
  })

  test('a task killed by SIGTERM is recorded with signal 15', async () => {
    const child = await startSleeper()
    process.kill(child.pid, 'SIGTERM')
    expect(await child.exited).toEqual({ exitCode: null, signal: 'SIGTERM' })
    await keeperGone(child.keeper!)
    expect(exitRecord(child.req.exitFile)).toEqual({
      v: 2,
      pid: child.pid,
      exitCode: null,
      signal: 15,
      endedAtMs: expect.any(Number),
      endedBy: 'itself',
      outputLostBytes: 0,
      ...KEEPER_FIGURES,
    })
    expect(readExitFile(child.req.exitFile)).toMatchObject({ pid: child.pid, exitCode: null, signal: 'SIGTERM' })
  })

  test("a leader killed with its busy child: the keeper waits for the dying child, and the exit file counts the child's CPU time", async () => {
    const dir = freshDir()
    const busy = 'import time\nwhile time.process_time() < 0.5: pass\nprint("done", flush=True)\ntime.sleep(600)\n'
    const req = request({ file: '/bin/sh', argv: ['sh', '-c', '/usr/bin/python3 -c "$0" & wait', busy], cwd: dir })
    const child = started(await spawner.spawn(req))
    leftovers.push(child.pid)
    await waitFor('the busy child to print done', () => readFileSync(req.outputFile, 'utf8') === 'done\n')
    // The whole group at once, as the daemon stops a tree: the leader, reaped first, ends before its child.
    process.kill(-child.pid, 'SIGTERM')
    expect(await child.exited).toEqual({ exitCode: null, signal: 'SIGTERM' })
    const record = exitRecord(req.exitFile) as { cpuUserMs: number; cpuSystemMs: number }
    expect(record.cpuUserMs + record.cpuSystemMs, JSON.stringify(record)).toBeGreaterThanOrEqual(450)
  })

  test('a leader that exits while its child runs on: the exit is reported at once, the live child is not waited for', async () => {
    const dir = freshDir()
    const req = request({ file: '/bin/sh', argv: ['sh', '-c', 'sleep 600 & echo $!; exit 0'], cwd: dir })
    const child = started(await spawner.spawn(req))
    leftovers.push(child.pid)
    expect(await child.exited).toEqual({ exitCode: 0, signal: null })
    const sleeper = Number(readFileSync(req.outputFile, 'utf8').trim())
    leftovers.push(sleeper)
    expect(isAlive(sleeper), 'the child still runs once the exit is reported').toBe(true)
    expect(exitRecord(req.exitFile)).toMatchObject({ exitCode: 0, signal: null })
  })

  test('a start that fails leaves no keeper, no task and no exit file', async () => {
    const dir = freshDir()
    const before = childrenOf(spawner.helperPid!)
    const outcome = await spawner.spawn(request({ file: join(dir, 'missing'), cwd: dir }))
    expect(outcome).toMatchObject({ started: false, stage: 'exec', code: 'ENOENT' })
    await waitFor('the failed keeper to be reaped', () => childrenOf(spawner.helperPid!).filter((pid) => !before.includes(pid)).length === 0, 5000)
    expect(existsSync(join(dir, 'exit.json'))).toBe(false)
  })

  test('a second helper attaches to a live keeper and reports the exit when the task ends', async () => {
    const child = await startSleeper()
    const other = await NativeSpawner.start(binary!)
    extraSpawners.push(other)
    const watching = await other.attach({ keeper: child.keeper!, taskPid: child.pid, exitFile: child.req.exitFile })
    if (!watching.attached) throw new Error(`expected to attach, got ${JSON.stringify(watching)}`)
    // Both helpers hear of the end: the keeper's own over its pipe, the other by its pidfd and the exit file.
    process.kill(child.pid, 'SIGTERM')
    expect(await watching.exited).toEqual({ exitCode: null, signal: 'SIGTERM' })
    expect(await child.exited).toEqual({ exitCode: null, signal: 'SIGTERM' })
  })

  test('the helper that started a task can be asked to attach to it too: each watcher hears the exit once', async () => {
    const child = await startSleeper()
    const watching = await spawner.attach({ keeper: child.keeper!, taskPid: child.pid, exitFile: child.req.exitFile })
    if (!watching.attached) throw new Error(`expected to attach, got ${JSON.stringify(watching)}`)
    process.kill(child.pid, 'SIGTERM')
    expect(await Promise.all([child.exited, watching.exited])).toEqual([
      { exitCode: null, signal: 'SIGTERM' },
      { exitCode: null, signal: 'SIGTERM' },
    ])
  })

  test('attach fails with ESRCH when the pid is not that keeper (another start time, or no such process), and refuses bad requests', async () => {
    const child = await startSleeper()
    const keeper = child.keeper!
    const noFile = join(freshDir(), 'exit.json')
    expect(await spawner.attach({ keeper: { pid: keeper.pid, startTicks: keeper.startTicks + 1 }, taskPid: child.pid, exitFile: noFile })).toMatchObject({
      attached: false,
      code: 'ESRCH',
    })
    // A live process that is not a keeper of this start time: this test runner.
    expect(await spawner.attach({ keeper: { pid: process.pid, startTicks: 1 }, taskPid: child.pid, exitFile: noFile })).toMatchObject({
      attached: false,
      code: 'ESRCH',
    })
    // A pid nobody has: the kernel's largest plus... the largest possible pid is never handed out here.
    const unused = await unusedPid()
    expect(await spawner.attach({ keeper: { pid: unused, startTicks: 1 }, taskPid: child.pid, exitFile: noFile })).toMatchObject({
      attached: false,
      code: 'ESRCH',
    })
    expect(await spawner.attach({ keeper: { pid: keeper.pid, startTicks: -1 }, taskPid: child.pid, exitFile: noFile })).toMatchObject({
      attached: false,
      code: 'EINVAL',
    })
    expect(await spawner.attach({ keeper, taskPid: child.pid, exitFile: 'relative/exit.json' })).toMatchObject({ attached: false, code: 'EINVAL' })
    // The helper is still there, and the keeper still watched by it.
    process.kill(child.pid, 'SIGKILL')
    expect(await child.exited).toEqual({ exitCode: null, signal: 'SIGKILL' })
  })

  test('attach fails with ESRCH for a keeper that has exited and is not reaped yet (a zombie), without its exit file: a recovering daemon learns it is gone at once', async () => {
    // A parent that never reaps: its child stays a zombie, start time and all, as a SIGKILLed keeper
    // does until whoever inherited it reaps it.
    const parent = spawn(
      '/usr/bin/python3',
      ['-c', 'import os, sys, time\npid = os.fork()\nif pid == 0: os._exit(0)\nprint(pid, flush=True)\ntime.sleep(600)'],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    )
    try {
      const zombie = Number(await new Promise<string>((resolve) => parent.stdout!.once('data', (chunk: Buffer) => resolve(chunk.toString()))))
      const stat = await waitFor('the child to be a zombie', () => {
        const text = readFileSync(`/proc/${zombie}/stat`, 'utf8')
        return text.slice(text.lastIndexOf(')') + 2).startsWith('Z') ? text : null
      })
      const startTicks = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19])
      const outcome = await spawner.attach({ keeper: { pid: zombie, startTicks }, taskPid: zombie + 1, exitFile: join(freshDir(), 'exit.json') })
      expect(outcome).toMatchObject({ attached: false, code: 'ESRCH' })
    } finally {
      parent.kill('SIGKILL')
      await new Promise((resolve) => parent.once('exit', resolve))
    }
  })

  test('attach to a keeper whose exit file is already there reports the exit at once', async () => {
    const dir = freshDir()
    const req = request({ file: '/bin/sh', argv: ['sh', '-c', 'exit 5'], cwd: dir })
    const child = started(await spawner.spawn(req))
    await child.exited
    await waitFor('the keeper to be gone', () => !isAlive(child.keeper!.pid), 5000)
    const watching = await spawner.attach({ keeper: child.keeper!, taskPid: child.pid, exitFile: req.exitFile })
    if (!watching.attached) throw new Error(`expected to attach, got ${JSON.stringify(watching)}`)
    expect(await watching.exited).toEqual({ exitCode: 5, signal: null })
    // An exit file that names another task is not this one's.
    const other = await spawner.attach({ keeper: child.keeper!, taskPid: child.pid + 1, exitFile: req.exitFile })
    expect(other).toMatchObject({ attached: false, code: 'ESRCH' })
  })

  test("a SIGKILLed keeper: its exit is reported unknown (-2), no exit file is left; the task itself is the daemon's to kill", async () => {
    const child = await startSleeper()
    process.kill(child.keeper!.pid, 'SIGKILL')
    expect(await child.exited).toEqual({ exitCode: null, signal: null, unknown: true })
    expect(existsSync(child.req.exitFile)).toBe(false)
    expect(isAlive(child.pid)).toBe(true)
  })

  test('an exit file whose folder was removed while the task ran: the exit is still reported, the keeper gives up at once', async () => {
    const dir = freshDir()
    const folder = join(dir, 'spool-entry')
    mkdirSync(folder)
    const child = await startSleeper({ cwd: dir, outputFile: join(dir, 'output.log'), exitFile: join(folder, 'exit.json') })
    rmSync(folder, { recursive: true })
    process.kill(child.pid, 'SIGTERM')
    expect(await child.exited).toEqual({ exitCode: null, signal: 'SIGTERM' })
    await waitFor('the keeper to be gone', () => !isAlive(child.keeper!.pid), 5000)
    expect(existsSync(folder)).toBe(false)
  })

  test('a full disk delays only the exit file: the exit is reported at once, and the keeper retries until the file lands', async () => {
    const mountPoint = freshDir()
    // Needs root and mount(2): a machine without them fails here, loudly.
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k,mode=0700', 'tend-test-full', mountPoint], { stdio: 'pipe' })
    try {
      const filler = join(mountPoint, 'filler')
      try {
        writeFileSync(filler, Buffer.alloc(1024 * 1024))
      } catch (error) {
        expect((error as NodeJS.ErrnoException).code).toBe('ENOSPC')
      }
      const dir = freshDir()
      const exitFile = join(mountPoint, 'exit.json')
      const child = started(await spawner.spawn(request({ file: '/bin/sh', argv: ['sh', '-c', 'exit 4'], cwd: dir, exitFile })))
      expect(await child.exited).toEqual({ exitCode: 4, signal: null })
      expect(existsSync(exitFile)).toBe(false)
      expect(isAlive(child.keeper!.pid)).toBe(true)
      rmSync(filler)
      await waitFor('the exit file to land once there is room', () => exitRecord(exitFile), 10_000)
      expect(exitRecord(exitFile)).toMatchObject({ pid: child.pid, exitCode: 4, signal: null })
      await waitFor('the keeper to be gone', () => !isAlive(child.keeper!.pid), 5000)
      expect(readdirSync(mountPoint)).toEqual(['exit.json'])
    } finally {
      execFileSync('umount', [mountPoint])
    }
  })

  test("a sandboxed task (bubblewrap --die-with-parent) survives the helper's death and dies with its keeper", async () => {
    const own = await NativeSpawner.start(binary!)
    extraSpawners.push(own)
    const marker = `TEND_KEEPER_TEST=${process.pid}-${Date.now()}`
    const [key, value] = marker.split('=') as [string, string]
    const bwrap = ['/usr/bin/bwrap', '--die-with-parent', '--unshare-pid', '--ro-bind', '/', '/', '--proc', '/proc', '--dev', '/dev', '/bin/sleep', '600']
    const child = started(await own.spawn(request({ file: bwrap[0]!, argv: bwrap, env: { [key]: value } })))
    child.exited.catch(() => {})
    leftovers.push(child.pid)
    // bubblewrap, its init in the new pid namespace, and sleep.
    const sandbox = await waitFor('the sandbox to be up', () => {
      const pids = processesWithEnv(marker).filter(isAlive)
      return pids.length >= 3 ? pids : undefined
    })
    const helper = own.helperPid!
    process.kill(helper, 'SIGKILL')
    await waitFor('the helper to be gone', () => !isAlive(helper), 5000)
    // Nothing of the sandbox went with the helper (each would be gone by the time its parent's
    // death was delivered: bubblewrap's parent is the keeper, alive).
    expect(sandbox.filter(isAlive)).toEqual(sandbox)
    expect(isAlive(child.keeper!.pid)).toBe(true)

    process.kill(child.keeper!.pid, 'SIGKILL')
    await waitFor('the whole sandbox to die with its keeper', () => processesWithEnv(marker).filter(isAlive).length === 0, 5000)
    // The new helper, watching the keeper since the first one died, finds no exit file.
    expect(await child.exited).toEqual({ exitCode: null, signal: null, unknown: true })
  })
})

/** The inode of a connected unix socket's peer, as the kernel's sock_diag reports it (ss -x). */
function peerOfUnixSocket(inode: string): string {
  const listing = execFileSync('ss', ['-x', '-a', '-n'], { encoding: 'utf8' })
  for (const line of listing.split('\n')) {
    const fields = line.trim().split(/\s+/)
    // Netid State Recv-Q Send-Q Local-Address Port Peer-Address Port
    if (fields[5] === inode) return fields[7]!
  }
  throw new Error(`no unix socket of inode ${inode} in ss -x:\n${listing}`)
}
