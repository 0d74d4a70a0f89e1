import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { execFileSync, spawn } from 'node:child_process'
import { chmodSync, chownSync, closeSync, constants as fsConstants, existsSync, lstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readlinkSync, realpathSync, renameSync, rmdirSync, rmSync, statSync, symlinkSync, writeFileSync, writeSync } from 'node:fs'
import { constants, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { readExitFile } from '../../daemon/spawn/exit-file.js'
import { NativeSpawner } from '../../daemon/spawn/native-spawner.js'
import type { KeeperRef, PinnedDir, SpawnExit, SpawnOutcome, SpawnRequest } from '../../daemon/spawn/spawner.js'
import { TaskCgroups } from '../../daemon/sandbox/cgroups.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { REPO_ROOT } from '../helpers/test-daemon.js'
import { spawnRequest } from '../helpers/spawn-request.js'
import { waitFor } from '../helpers/wait-for.js'

/**
 * The native spawner with real processes: the C helper (built by `npm run build`) starts every
 * child, so these tests check what the child actually gets (argv, env, descriptors, session,
 * limits, signals) by asking the kernel or the child itself.
 */

const binary = NativeSpawner.binaryPath()
let spawner: NativeSpawner
let scratch: string
/** Long-running children started by a test, killed after it. */
const leftovers: number[] = []
/** Spawners a test started besides the shared one, closed after it. */
const extraSpawners: NativeSpawner[] = []

beforeAll(async () => {
  if (!binary) throw new Error('dist/native/tend-spawner is missing: run `npm run build` (it needs a C compiler)')
  spawner = await NativeSpawner.start(binary)
  scratch = realpathSync(mkdtempSync(join(tmpdir(), 'tend-native-spawner-')))
})

afterEach(async () => {
  for (const pid of leftovers.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // already gone
    }
    await waitFor(`leftover child ${pid} to be gone`, () => !isAlive(pid), 5000)
  }
  for (const extra of extraSpawners.splice(0)) await extra.close()
})

afterAll(async () => {
  const helper = spawner?.helperPid
  await spawner?.close()
  if (helper) expect(isAlive(helper)).toBe(false)
  if (scratch) rmSync(scratch, { recursive: true, force: true })
})

let dirCount = 0
function freshDir(): string {
  return mkdtempSync(join(scratch, `t${dirCount++}-`))
}

function request(overrides: Partial<SpawnRequest> & { file: string }): SpawnRequest {
  return spawnRequest(overrides.cwd ?? freshDir(), overrides)
}

function started(outcome: SpawnOutcome): { pid: number; keeper: KeeperRef | null; exited: Promise<SpawnExit> } {
  if (!outcome.started) throw new Error(`expected the child to start, got ${JSON.stringify(outcome)}`)
  return outcome
}

/** Runs a request to its end; returns the exit and what the child wrote. */
async function run(req: SpawnRequest, using: NativeSpawner = spawner): Promise<SpawnExit & { output: string; pid: number }> {
  const child = started(await using.spawn(req))
  const exit = await child.exited
  const output = existsSync(req.outputFile) ? readFileSync(req.outputFile, 'utf8') : ''
  return { ...exit, output, pid: child.pid }
}

/** Starts a child that stays (sleep) and registers it for clean-up. */
async function startSleeper(req: Partial<SpawnRequest> = {}, using: NativeSpawner = spawner): Promise<{ pid: number; keeper: KeeperRef | null; exited: Promise<SpawnExit>; req: SpawnRequest }> {
  const full = request({ file: '/bin/sleep', argv: ['sleep', '600'], ...req })
  const child = started(await using.spawn(full))
  leftovers.push(child.pid)
  // Its exit may go unobserved (or reject when a test kills the helper): never an unhandled rejection.
  child.exited.catch(() => {})
  return { ...child, req: full }
}

/**
 * The child's descriptors settle at `expected`. Right after the exec its program is still starting
 * (the loader briefly opens libraries on the next free descriptors), so this waits; a descriptor
 * the helper leaked never goes away and fails the wait.
 */
async function expectOpenDescriptors(pid: number, expected: string[]): Promise<void> {
  let last: string[] = []
  const settled = () => {
    last = readdirSync(`/proc/${pid}/fd`).sort()
    return JSON.stringify(last) === JSON.stringify(expected)
  }
  await waitFor(`the descriptors of ${pid} to be exactly ${expected.join(', ')}`, settled, 5000).catch((error: Error) => {
    throw new Error(`${error.message}; open: ${last.join(', ')}`)
  })
}

/** Fields of /proc/<pid>/stat after the command name: [state, ppid, pgrp, session, ...]. */
function procStat(pid: number): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
}

describe('native spawner', () => {
  test('binaryPath finds the built helper under the package root', () => {
    expect(binary).toBe(join(REPO_ROOT, 'dist', 'native', 'tend-spawner'))
    expect(spawner.kind).toBe('native')
  })

  test('argv reaches the program exactly, argv[0] included (empty strings, spaces, newlines, unicode)', async () => {
    const argv = ['custom argv0 ü', '-c', 'cat /proc/$$/cmdline', '', 'a b', 'line\nbreak', 'ünïcødé ✓ 𝄞', '  ', '']
    const result = await run(request({ file: '/bin/sh', argv }))
    expect(result).toMatchObject({ exitCode: 0, signal: null })
    expect(result.output).toBe(argv.map((arg) => `${arg}\0`).join(''))
  })

  test('a large request (megabytes of arguments, several pipe reads) arrives whole', async () => {
    const big = Array.from({ length: 120 }, (_, i) => `${i}:`.padEnd(10_000, String.fromCharCode(97 + (i % 26))))
    const argv = ['sh', '-c', 'cat /proc/$$/cmdline', 'x', ...big]
    const result = await run(request({ file: '/bin/sh', argv }))
    expect(result.exitCode).toBe(0)
    expect(result.output).toBe(argv.map((arg) => `${arg}\0`).join(''))
  })

  test('the environment is exactly the given one: nothing is inherited', async () => {
    const env = { ALPHA: '1', 'WITH SPACE': 'a b', EMPTY: '', MULTI: 'line1\nline2', UNI: 'ü✓', EQ: 'a=b=c' }
    const result = await run(request({ file: '/usr/bin/env', argv: ['env', '-0'], env }))
    expect(result.exitCode).toBe(0)
    expect(result.output).toBe(Object.entries(env).map(([key, value]) => `${key}=${value}\0`).join(''))
  })

  test('the child runs in cwd', async () => {
    const dir = freshDir()
    const result = await run(request({ file: '/bin/pwd', argv: ['pwd'], cwd: dir }))
    expect(result.output).toBe(`${realpathSync(dir)}\n`)
  })

  test('a relative program is found relative to cwd, not on any PATH', async () => {
    const dir = freshDir()
    writeFileSync(join(dir, 'hello.sh'), '#!/bin/sh\necho hello from "$0"\n', { mode: 0o755 })
    const result = await run(request({ file: './hello.sh', argv: ['./hello.sh'], cwd: dir }))
    expect(result).toMatchObject({ exitCode: 0, output: 'hello from ./hello.sh\n' })
  })

  test('a bare name is searched on the PATH of the given env, not the helper\'s', async () => {
    const bin = freshDir()
    writeFileSync(join(bin, 'tend-only-here'), '#!/bin/sh\necho found on the task PATH\n', { mode: 0o755 })
    const found = await run(request({ file: 'tend-only-here', argv: ['tend-only-here'], env: { PATH: `/nonexistent:${bin}` } }))
    expect(found).toMatchObject({ exitCode: 0, output: 'found on the task PATH\n' })
    const missing = await spawner.spawn(request({ file: 'sh', argv: ['sh'], env: { PATH: bin } }))
    expect(missing).toMatchObject({ started: false, stage: 'exec', code: 'ENOENT', message: 'no such program: sh' })
  })

  test('stdout and stderr share one append-mode file: interleaved in order, created 0600', async () => {
    const req = request({ file: '/bin/sh', argv: ['sh', '-c', 'echo out1; echo err1 >&2; echo out2; echo err2 >&2; printf tail'] })
    expect(existsSync(req.outputFile)).toBe(false)
    const result = await run(req)
    expect(result.output).toBe('out1\nerr1\nout2\nerr2\ntail')
    expect(statSync(req.outputFile).mode & 0o777).toBe(0o600)
  })

  test('an existing output file is appended to, never truncated', async () => {
    const req = request({ file: '/bin/sh', argv: ['sh', '-c', 'echo new; echo more >&2'] })
    writeFileSync(req.outputFile, 'before\n', { mode: 0o644 })
    const result = await run(req)
    expect(result.output).toBe('before\nnew\nmore\n')
    expect(statSync(req.outputFile).mode & 0o777).toBe(0o644)
  })

  test('stdin is /dev/null: cat ends at once with no output', async () => {
    const result = await run(request({ file: '/bin/cat', argv: ['cat'] }))
    expect(result).toMatchObject({ exitCode: 0, signal: null, output: '' })
  })

  test('the child leads a new session and process group; its parent is its keeper, the helper\'s child', async () => {
    const child = await startSleeper()
    const [, ppid, pgrp, session] = procStat(child.pid)
    expect(Number(pgrp)).toBe(child.pid)
    expect(Number(session)).toBe(child.pid)
    expect(Number(ppid)).toBe(child.keeper!.pid)
    expect(Number(procStat(child.keeper!.pid)[1])).toBe(spawner.helperPid)
  })

  test('the child has only 0, 1, 2 open: /dev/null and the output file, nothing of the helper', async () => {
    const child = await startSleeper()
    await expectOpenDescriptors(child.pid, ['0', '1', '2'])
    expect(readlinkSync(`/proc/${child.pid}/fd/0`)).toBe('/dev/null')
    expect(readlinkSync(`/proc/${child.pid}/fd/1`)).toBe(realpathSync(child.req.outputFile))
    expect(readlinkSync(`/proc/${child.pid}/fd/2`)).toBe(realpathSync(child.req.outputFile))
    // One open file description for both: the same position and flags (O_APPEND is 02000).
    const info1 = readFileSync(`/proc/${child.pid}/fdinfo/1`, 'utf8')
    const flags = Number.parseInt(/flags:\s+(\d+)/.exec(info1)![1]!, 8)
    expect(flags & 0o2000).toBe(0o2000)
  })

  test('extra files are read-only on fd 3 and 4, and nothing else is open', async () => {
    const dir = freshDir()
    const first = join(dir, 'first')
    const second = join(dir, 'second')
    writeFileSync(first, 'one\n')
    writeFileSync(second, 'two\n')
    const child = await startSleeper({ cwd: dir, extraFiles: [first, second] })
    await expectOpenDescriptors(child.pid, ['0', '1', '2', '3', '4'])
    expect(readlinkSync(`/proc/${child.pid}/fd/3`)).toBe(realpathSync(first))
    expect(readlinkSync(`/proc/${child.pid}/fd/4`)).toBe(realpathSync(second))

    const result = await run(request({ file: '/bin/sh', argv: ['sh', '-c', 'cat <&3; cat <&4; echo x >&3 2>/dev/null || echo read-only'], extraFiles: [first, second] }))
    expect(result).toMatchObject({ exitCode: 0, output: 'one\ntwo\nread-only\n' })
  })

  test('inside the child /proc/self/fd lists only the standard and extra descriptors', async () => {
    const dir = freshDir()
    writeFileSync(join(dir, 'extra'), 'x')
    // sh probes its own fd table with stat (a directory listing would show its own descriptor):
    // nothing besides 0-3, none of the helper's pipes, may be open.
    const probe = 'n=0; while [ $n -lt 1024 ]; do [ -e /proc/$$/fd/$n ] && echo $n; n=$((n+1)); done'
    const result = await run(request({ file: '/bin/sh', argv: ['sh', '-c', probe], cwd: dir, extraFiles: [join(dir, 'extra')] }))
    expect(result.output.split('\n').filter(Boolean).sort()).toEqual(['0', '1', '2', '3'])
  })

  test('the signal mask is empty and no signal is ignored or caught', async () => {
    const result = await run(request({ file: '/bin/cat', argv: ['cat', '/proc/self/status'] }))
    const field = (name: string) => new RegExp(`^${name}:\\s+([0-9a-f]+)$`, 'm').exec(result.output)?.[1]
    expect(field('SigBlk')).toBe('0000000000000000')
    expect(field('SigIgn')).toBe('0000000000000000')
    expect(field('SigCgt')).toBe('0000000000000000')
  })

  test('limits: open files, file size (in 512-byte blocks for ulimit -f) and no core dumps', async () => {
    const result = await run(request({ file: '/bin/sh', argv: ['sh', '-c', 'ulimit -n; ulimit -Hn; ulimit -f; ulimit -Hf; ulimit -c; ulimit -Hc'], limits: { openFiles: 321, fileSizeBytes: 512 * 777 } }))
    expect(result.output).toBe('321\n321\n777\n777\n0\n0\n')
  })

  test('writing past the file size limit kills the child with SIGXFSZ', async () => {
    const req = request({ file: '/usr/bin/head', argv: ['head', '-c', '4096', '/dev/zero'], limits: { openFiles: 64, fileSizeBytes: 1024 } })
    const result = await run(req)
    expect(result).toMatchObject({ exitCode: null, signal: 'SIGXFSZ' })
    expect(statSync(req.outputFile).size).toBe(1024)
  })

  test("the child writes 0 (itself) into each cgroup folder's tasks file before it execs", async () => {
    const dir = freshDir()
    const groups = ['memory', 'pids'].map((name) => join(dir, name))
    for (const group of groups) {
      mkdirSync(group)
      writeFileSync(join(group, 'tasks'), '')
    }
    const result = await run(request({ file: '/bin/true', argv: ['true'], cwd: dir, cgroups: groups.map(groupOf) }))
    expect(result.exitCode).toBe(0)
    for (const group of groups) expect(readFileSync(join(group, 'tasks'), 'utf8')).toBe('0\n')
  })

  test('a task is in its cgroup from its first instruction: the child joins through the group\'s tasks file', async () => {
    const root = '/sys/fs/cgroup/pids'
    expect(existsSync(join(root, 'cgroup.procs')), 'a cgroup v1 pids hierarchy at /sys/fs/cgroup/pids').toBe(true)
    const group = join(root, `tend-test-${process.pid}`)
    mkdirSync(group)
    try {
      const result = await run(request({ file: '/bin/cat', argv: ['cat', '/proc/self/cgroup'], cwd: freshDir(), cgroups: [groupOf(group)] }))
      expect(result.exitCode).toBe(0)
      expect(result.output).toMatch(new RegExp(`^\\d+:pids:/tend-test-${process.pid}$`, 'm'))
    } finally {
      await removeCgroup(group)
    }
  })

  test('a cgroup that cannot be joined fails at stage cgroup, naming the folder, before the output is opened', async () => {
    const dir = freshDir()
    const good = join(dir, 'good')
    mkdirSync(good)
    writeFileSync(join(good, 'tasks'), '')
    const missing = join(dir, 'missing')
    const req = request({ file: '/bin/true', cwd: dir, cgroups: [groupOf(good), { ...groupOf(good), path: missing }] })
    const outcome = await spawner.spawn(req)
    expect(outcome).toEqual({ started: false, stage: 'cgroup', code: 'ENOENT', message: `could not join cgroup ${missing}: ENOENT` })
    // The keeper holds the output file from before the fork (no write lease can be had on it), so it
    // exists, empty: the child never opened it to write.
    expect(readFileSync(req.outputFile, 'utf8')).toBe('')
    // A `tasks` that is a folder cannot be opened for writing, even by root.
    const odd = join(dir, 'odd')
    mkdirSync(join(odd, 'tasks'), { recursive: true })
    const unwritable = await spawner.spawn(request({ file: '/bin/true', cgroups: [groupOf(odd)] }))
    expect(unwritable).toMatchObject({ started: false, stage: 'cgroup', code: 'EISDIR', message: `could not join cgroup ${odd}: EISDIR` })
  })

  test("a cgroup folder renamed and replaced by another (its parent is another uid's) fails the spawn at stage cgroup, ESTALE: nothing joins the replacement", async () => {
    const controller = '/sys/fs/cgroup/pids'
    expect(existsSync(join(controller, 'cgroup.procs')), 'a cgroup v1 pids hierarchy at /sys/fs/cgroup/pids').toBe(true)
    const parent = join(controller, `tend-swap-${process.pid}`)
    mkdirSync(parent)
    const groups = TaskCgroups.create({ memory: null, pids: parent }, 'swapped', { memory: false, limits: { memoryBytes: null, pidsMax: null } })
    const [made] = groups.joinEntries()
    try {
      expect(made).toMatchObject({ path: join(parent, 'swapped'), uid: 0 })
      renameSync(join(parent, 'swapped'), join(parent, 'swapped-made'))
      // The replacement: a group without the limits, at the same path.
      mkdirSync(join(parent, 'swapped'))
      const req = request({ file: '/bin/sleep', argv: ['sleep', '60'], cgroups: [made!] })
      const outcome = await spawner.spawn(req)
      expect(outcome).toMatchObject({ started: false, stage: 'cgroup', code: 'ESTALE', message: expect.stringContaining(`could not join cgroup ${made!.path}: it is no longer the folder the daemon made`) })
      expect(readFileSync(join(parent, 'swapped', 'cgroup.procs'), 'utf8')).toBe('')
      expect(readFileSync(req.outputFile, 'utf8')).toBe('')
    } finally {
      for (const name of ['swapped', 'swapped-made']) await removeCgroup(join(parent, name))
      await removeCgroup(parent)
    }
  })

  test('a cgroup folder with another owner, or reached through a symbolic link, is refused too', async () => {
    const dir = freshDir()
    const group = join(dir, 'group')
    mkdirSync(group)
    writeFileSync(join(group, 'tasks'), '')
    const otherOwner = await spawner.spawn(request({ file: '/bin/true', cgroups: [{ ...groupOf(group), uid: 4242 }] }))
    expect(otherOwner).toMatchObject({ started: false, stage: 'cgroup', code: 'ESTALE' })
    symlinkSync(dir, join(dir, 'link'))
    const linked = await spawner.spawn(request({ file: '/bin/true', cgroups: [{ ...groupOf(group), path: join(dir, 'link', 'group') }] }))
    expect(linked).toMatchObject({ started: false, stage: 'cgroup', code: 'ELOOP' })
    expect(readFileSync(join(group, 'tasks'), 'utf8')).toBe('')
  })

  test('a missing cwd fails at stage chdir with ENOENT', async () => {
    const dir = freshDir()
    const cwd = join(dir, 'nowhere')
    const outcome = await spawner.spawn(request({ file: '/bin/true', cwd, outputFile: join(dir, 'out.log') }))
    expect(outcome).toEqual({ started: false, stage: 'chdir', code: 'ENOENT', message: `cwd does not exist: ${cwd}` })
  })

  test('a missing program fails at stage exec with ENOENT, a non-executable one with EACCES', async () => {
    const dir = freshDir()
    const missing = join(dir, 'no-such-program')
    expect(await spawner.spawn(request({ file: missing, cwd: dir }))).toEqual({ started: false, stage: 'exec', code: 'ENOENT', message: `no such program: ${missing}` })
    const plain = join(dir, 'plain.sh')
    writeFileSync(plain, '#!/bin/sh\necho nope\n')
    chmodSync(plain, 0o644)
    expect(await spawner.spawn(request({ file: plain, cwd: dir }))).toEqual({ started: false, stage: 'exec', code: 'EACCES', message: `program is not executable: ${plain}` })
  })

  test('an output file that cannot be opened fails at stage output; a missing extra file at stage extra', async () => {
    const dir = freshDir()
    const badOutput = join(dir, 'missing-dir', 'out.log')
    expect(await spawner.spawn(request({ file: '/bin/true', cwd: dir, outputFile: badOutput }))).toEqual({
      started: false,
      stage: 'output',
      code: 'ENOENT',
      message: `could not open the output file ${badOutput}: ENOENT`,
    })
    const present = join(dir, 'present')
    writeFileSync(present, '')
    const absent = join(dir, 'absent')
    expect(await spawner.spawn(request({ file: '/bin/true', cwd: dir, extraFiles: [present, absent] }))).toMatchObject({
      started: false,
      stage: 'extra',
      code: 'ENOENT',
      message: `could not open ${absent}: ENOENT`,
    })
  })

  test('a request the wire cannot carry (a NUL byte) is refused without disturbing the helper', async () => {
    const helper = spawner.helperPid
    const outcome = await spawner.spawn(request({ file: '/bin/true', argv: ['true', 'a\0b'] }))
    expect(outcome).toMatchObject({ started: false, stage: 'request', code: 'EINVAL' })
    expect((await run(request({ file: '/bin/true' }))).exitCode).toBe(0)
    expect(spawner.helperPid).toBe(helper)
  })

  test('exit codes pass through', async () => {
    const result = await run(request({ file: '/bin/sh', argv: ['sh', '-c', 'exit 3'] }))
    expect(result).toMatchObject({ exitCode: 3, signal: null })
  })

  test('a signal death reads exitCode null and the signal name', async () => {
    const result = await run(request({ file: '/bin/sh', argv: ['sh', '-c', 'kill -TERM $$'] }))
    expect(result).toMatchObject({ exitCode: null, signal: 'SIGTERM' })
  })

  test('a killed long-running child is reported with its signal', async () => {
    const child = await startSleeper()
    process.kill(child.pid, 'SIGKILL')
    expect(await child.exited).toEqual({ exitCode: null, signal: 'SIGKILL' })
  })

  test('200 concurrent spawns all start and exit 0 with distinct pids', async () => {
    const dir = freshDir()
    const outcomes = await Promise.all(Array.from({ length: 200 }, () => spawner.spawn(request({ file: '/bin/true', argv: ['true'], cwd: dir }))))
    const children = outcomes.map(started)
    expect(new Set(children.map((child) => child.pid)).size).toBe(200)
    const exits = await Promise.all(children.map((child) => child.exited))
    expect(exits.every((exit) => exit.exitCode === 0 && exit.signal === null)).toBe(true)
  })

  test('a malformed request makes the helper say so and exit 2', async () => {
    const helper = spawn(binary!, [String(process.pid)], { stdio: ['pipe', 'pipe', 'pipe'] })
    let stdout = ''
    helper.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    const exited = new Promise<number | null>((resolve) => helper.once('close', (code) => resolve(code)))
    helper.stdin.on('error', () => {}) // EPIPE if it exits before taking everything
    const payload = Buffer.from('1\0/bin/true\0/tmp\0/tmp/x\0not-a-number\0', 'utf8')
    const header = Buffer.alloc(4)
    header.writeUInt32LE(payload.length)
    helper.stdin.end(Buffer.concat([header, payload]))
    expect(await exited).toBe(2)
    expect(stdout).toMatch(/^error openFiles is not a decimal number\n$/)
  })

  test('when the helper is killed, pending spawns fail, a new helper watches the running children\'s keepers (their exits still arrive), and serves the next spawn', async () => {
    const own = await NativeSpawner.start(binary!)
    extraSpawners.push(own)
    const dir = freshDir()
    const gate = fifo(dir)
    // Ends with 3 once the test writes to its fifo.
    const child = started(await own.spawn(request({ file: '/bin/sh', argv: ['sh', '-c', 'read line < ./gate; exit 3'], cwd: dir })))
    leftovers.push(child.pid)
    const firstHelper = own.helperPid!
    // Stopped first, so the request below is certainly still unanswered when the helper dies.
    process.kill(firstHelper, 'SIGSTOP')
    const pending = own.spawn(request({ file: '/bin/true' }))
    process.kill(firstHelper, 'SIGKILL')

    expect(await pending).toMatchObject({ started: false, stage: 'spawner', code: 'ESPAWNER' })
    await waitFor('the killed helper to be gone', () => !isAlive(firstHelper), 5000)
    // The child and its keeper are untouched; a new helper is watching the keeper.
    expect(isAlive(child.pid)).toBe(true)
    expect(isAlive(child.keeper!.pid)).toBe(true)
    const secondHelper = await waitFor('a new helper', () => own.helperPid !== firstHelper && own.helperPid)
    writeFileSync(gate, 'go\n')
    expect(await child.exited).toEqual({ exitCode: 3, signal: null })
    await keeperGone(child.keeper!)
    expect(exitRecord(join(dir, 'exit.json'))).toMatchObject({ pid: child.pid, exitCode: 3, signal: null })

    const result = await run(request({ file: '/bin/sh', argv: ['sh', '-c', 'exit 7'] }), own)
    expect(result.exitCode).toBe(7)
    expect(own.helperPid).toBe(secondHelper)
  })

  test('close() stops the helper, leaves running children and their keepers alone, and refuses later spawns and attaches', async () => {
    const own = await NativeSpawner.start(binary!)
    const helper = own.helperPid!
    const child = await startSleeper({}, own)
    const exitError = child.exited.then(
      () => null,
      (error: Error) => error,
    )
    await own.close()
    expect(isAlive(helper)).toBe(false)
    expect(isAlive(child.pid)).toBe(true)
    expect(isAlive(child.keeper!.pid)).toBe(true)
    expect((await exitError)?.message).toMatch(/spawner was closed/)
    expect(await own.spawn(request({ file: '/bin/true' }))).toMatchObject({ started: false, stage: 'spawner', code: 'ESPAWNER' })
    expect(await own.attach({ keeper: child.keeper!, taskPid: child.pid, exitFile: child.req.exitFile })).toMatchObject({ attached: false, code: 'ESPAWNER' })
    expect(own.helperPid).toBeUndefined()
    // The keeper still records the end.
    process.kill(child.pid, 'SIGTERM')
    await waitFor('the exit file', () => exitRecord(child.req.exitFile))
    expect(exitRecord(child.req.exitFile)).toMatchObject({ pid: child.pid, exitCode: null, signal: 15 })
    await waitFor('the keeper to be gone', () => !isAlive(child.keeper!.pid), 5000)
  })

  test('the helper dies with the process that started it; its keepers and their tasks do not, and another helper attaches to them', async () => {
    const dir = freshDir()
    const req = request({ file: '/bin/sleep', argv: ['sleep', '600'], cwd: dir })
    const script = [
      `import { NativeSpawner } from ${JSON.stringify(join(REPO_ROOT, 'dist', 'daemon', 'spawn', 'native-spawner.js'))}`,
      // The helper's pipes never hold the event loop open: this does, through the spawn.
      'setInterval(() => {}, 1000)',
      'const spawner = await NativeSpawner.start(NativeSpawner.binaryPath())',
      `const child = await spawner.spawn(${JSON.stringify(req)})`,
      'console.log(JSON.stringify({ helper: spawner.helperPid, child }))',
    ].join('\n')
    const owner = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let stdout = ''
    owner.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    const ownerGone = new Promise((resolve) => owner.once('close', resolve))
    const said = await waitFor('the owner to print its helper and child', () => (stdout.includes('\n') ? (JSON.parse(stdout.split('\n')[0]!) as { helper: number; child: { pid: number; keeper: KeeperRef } }) : undefined))
    const { helper, child } = said
    leftovers.push(child.pid)
    expect(isAlive(helper)).toBe(true)
    owner.kill('SIGKILL')
    await ownerGone
    await waitFor(`helper ${helper} to die with its owner`, () => !isAlive(helper), 5000)
    expect(isAlive(child.keeper.pid)).toBe(true)
    expect(isAlive(child.pid)).toBe(true)

    const watching = await spawner.attach({ keeper: child.keeper, taskPid: child.pid, exitFile: req.exitFile })
    if (!watching.attached) throw new Error(`expected to attach, got ${JSON.stringify(watching)}`)
    process.kill(child.pid, 'SIGTERM')
    // The exit is heard once the keeper has exited, so its exit file is there.
    expect(await watching.exited).toEqual({ exitCode: null, signal: 'SIGTERM' })
    expect(exitRecord(req.exitFile)).toMatchObject({ pid: child.pid, exitCode: null, signal: 15 })
  })
})

describe('native spawner: descriptors for bubblewrap, and its own environment', () => {
  test('the helper runs with a fixed minimal environment, not the daemon\'s', async () => {
    const own = await NativeSpawner.start(binary!)
    extraSpawners.push(own)
    // Empty until the kernel has set up the new program's memory (seen once on a loaded machine).
    const environ = await waitFor('the helper to have an environment', () => readFileSync(`/proc/${own.helperPid}/environ`, 'latin1') || undefined, 5000)
    expect(environ).toBe('PATH=/usr/sbin:/usr/bin:/sbin:/bin\0')
  })

  test('in-memory files are read-only, sealed memory files; pinned folders are O_PATH descriptors; nothing else is open', async () => {
    const dir = freshDir()
    const child = await startSleeper({ cwd: dir, dataFiles: [Buffer.from('one'), Buffer.alloc(0)], pinnedDirs: [pinOf(dir)] })
    await expectOpenDescriptors(child.pid, ['0', '1', '2', '3', '4', '5'])
    for (const fd of [3, 4]) {
      expect(readlinkSync(`/proc/${child.pid}/fd/${fd}`)).toMatch(/^\/memfd:tend-data \(deleted\)$/)
      const flags = Number.parseInt(/flags:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/fdinfo/${fd}`, 'utf8'))![1]!, 8)
      expect(flags & 0o3).toBe(0) // O_RDONLY
    }
    expect(readlinkSync(`/proc/${child.pid}/fd/5`)).toBe(dir)
    const pinnedFlags = Number.parseInt(/flags:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/fdinfo/5`, 'utf8'))![1]!, 8)
    expect(pinnedFlags & 0o10000000).toBe(0o10000000) // O_PATH

    // Reopened for writing through /proc, the memory file still refuses writes: it is sealed.
    const result = await run(request({ file: '/bin/sh', argv: ['sh', '-c', 'cat <&3; echo x >&3 2>/dev/null || echo read-only; echo x >>/proc/self/fd/3 2>/dev/null || echo sealed'], dataFiles: [Buffer.from('data\n')] }))
    expect(result).toMatchObject({ exitCode: 0, output: 'data\nread-only\nsealed\n' })
  })

  test('the failing pinned folder is named among several; earlier ones are not blamed', async () => {
    const first = freshDir()
    const second = freshDir()
    const pins = [pinOf(first), pinOf(second)]
    rmSync(second, { recursive: true })
    const outcome = await spawner.spawn(request({ file: '/bin/true', pinnedDirs: pins }))
    expect(outcome).toEqual({ started: false, stage: 'pinned', code: 'ENOENT', message: `folder changed since the task was accepted: ${second} (it no longer exists)` })
  })
  test('a blob that runs past the end of its request is malformed: the helper says so and exits 2', async () => {
    const helper = spawn(binary!, [String(process.pid)], { stdio: ['pipe', 'pipe', 'pipe'] })
    let stdout = ''
    helper.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    const exited = new Promise<number | null>((resolve) => helper.once('close', (code) => resolve(code)))
    helper.stdin.on('error', () => {})
    // No cwd identity, no user, argv [true], no env, extra files, cgroups, pins, views or hidden paths, one blob of 100 bytes holding 3.
    const fields = ['1', '/bin/true', '/tmp', '/tmp/x', '64', '1000', '', '', '', '', '1', 'true', '0', '0', '0', '0', '0', '0', '1', '100']
    const payload = Buffer.concat([Buffer.from(fields.map((field) => `${field}\0`).join('')), Buffer.from('abc')])
    const header = Buffer.alloc(4)
    header.writeUInt32LE(payload.length)
    helper.stdin.end(Buffer.concat([header, payload]))
    expect(await exited).toBe(2)
    expect(stdout).toBe('error truncated request: a blob is shorter than its length\n')
  })

  test('more descriptors than the wire carries are refused as a bad request without disturbing the helper', async () => {
    const helper = spawner.helperPid
    const outcome = await spawner.spawn(request({ file: '/bin/true', dataFiles: Array.from({ length: 1025 }, () => Buffer.alloc(0)) }))
    expect(outcome).toMatchObject({ started: false, stage: 'request', code: 'EINVAL' })
    expect((await run(request({ file: '/bin/true' }))).exitCode).toBe(0)
    expect(spawner.helperPid).toBe(helper)
  })
})

/** Waits for a keeper to exit: its exit file, if it could write one, is there by then. */
async function keeperGone(keeper: KeeperRef): Promise<void> {
  await waitFor(`keeper ${keeper.pid} to exit`, () => !isAlive(keeper.pid), 5000)
}

/** A named pipe: a task that reads it waits until the test writes a line. */
function fifo(dir: string): string {
  const path = join(dir, 'gate')
  execFileSync('mkfifo', ['-m', '600', path])
  return path
}

/** The parsed exit file, or undefined while there is none. */
function exitRecord(path: string): Record<string, unknown> | undefined {
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>) : undefined
}

function pinOf(path: string): { path: string; dev: string; ino: string } {
  const info = statSync(path, { bigint: true })
  return { path, dev: String(info.dev), ino: String(info.ino) }
}

/** A cgroup join entry for a folder as it is now. */
function groupOf(path: string): { path: string; dev: string; ino: string; uid: number } {
  const info = statSync(path, { bigint: true })
  return { path, dev: String(info.dev), ino: String(info.ino), uid: Number(info.uid) }
}

/** A pinned folder idmapped to its owner as it is now. */
function mappedPinOf(path: string): PinnedDir {
  const info = statSync(path, { bigint: true })
  return { path, dev: String(info.dev), ino: String(info.ino), owner: { uid: Number(info.uid), gid: Number(info.gid) } }
}

/** rmdir of a cgroup: EBUSY until its last process is released. */
async function removeCgroup(group: string): Promise<void> {
  await waitFor(`the cgroup ${group} to be empty and removed`, () => {
    try {
      rmdirSync(group)
    } catch {
      // busy, or gone
    }
    return !existsSync(group)
  })
}

describe('native spawner: keepers', () => {
  test('started names the keeper: the task\'s parent, the leader of its own session (not the helper\'s), with its start time', async () => {
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

  test('the keeper keeps nothing of the helper\'s: /dev/null on 0-2, its report pipe and the exit file\'s folder; its cwd is /', async () => {
    const child = await startSleeper()
    const keeper = child.keeper!.pid
    const fds = readdirSync(`/proc/${keeper}/fd`).sort((a, b) => Number(a) - Number(b))
    const targets = fds.map((fd) => readlinkSync(`/proc/${keeper}/fd/${fd}`))
    expect(targets.slice(0, 3)).toEqual(['/dev/null', '/dev/null', '/dev/null'])
    // And the output file, read-only, never read: held so that no write lease can be taken on it.
    expect(targets.slice(3).sort()).toEqual([dirname(child.req.exitFile), child.req.outputFile, expect.stringMatching(/^pipe:\[\d+\]$/)].sort())
    const outputFd = fds[targets.indexOf(child.req.outputFile)]!
    const flags = parseInt(/^flags:\s+([0-7]+)$/m.exec(readFileSync(`/proc/${keeper}/fdinfo/${outputFd}`, 'utf8'))![1]!, 8)
    expect(flags & 0o3 /* O_ACCMODE */).toBe(fsConstants.O_RDONLY)
    const pipe = targets.find((target) => target.startsWith('pipe:'))!
    // That pipe is one the helper reads, and none of the daemon's: not the helper's stdin, stdout or stderr.
    const helperFds = readdirSync(`/proc/${spawner.helperPid}/fd`).map((fd) => ({ fd, target: readlinkSync(`/proc/${spawner.helperPid}/fd/${fd}`) }))
    expect(helperFds.filter((entry) => entry.target === pipe).map((entry) => Number(entry.fd))).toEqual([expect.any(Number)])
    expect(helperFds.filter((entry) => entry.target === pipe && Number(entry.fd) < 3)).toEqual([])
    expect(readlinkSync(`/proc/${keeper}/cwd`)).toBe('/')
  })

  test('exit 3 is recorded in the exit file: one whole JSON line, 0600, with the task\'s pid and the time it ended; no temporary file is left', async () => {
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
    expect(record).toEqual({ pid: result.pid, exitCode: 3, signal: null, endedAtMs: expect.any(Number) })
    expect(record.endedAtMs).toBeGreaterThanOrEqual(before)
    expect(record.endedAtMs).toBeLessThanOrEqual(after)
    expect(statSync(req.exitFile).mode & 0o777).toBe(0o600)
    await keeperGone(child.keeper!)
    expect(readdirSync(dir).sort()).toEqual(['exit.json', 'output.log'])
    expect(readExitFile(req.exitFile)).toEqual({ pid: result.pid, exitCode: 3, signal: null, endedAt: new Date(record.endedAtMs).toISOString() })
  })

  test('a task killed by SIGTERM is recorded with signal 15', async () => {
    const child = await startSleeper()
    process.kill(child.pid, 'SIGTERM')
    expect(await child.exited).toEqual({ exitCode: null, signal: 'SIGTERM' })
    await keeperGone(child.keeper!)
    expect(exitRecord(child.req.exitFile)).toEqual({ pid: child.pid, exitCode: null, signal: 15, endedAtMs: expect.any(Number) })
    expect(readExitFile(child.req.exitFile)).toMatchObject({ pid: child.pid, exitCode: null, signal: 'SIGTERM' })
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
    expect(await spawner.attach({ keeper: { pid: keeper.pid, startTicks: keeper.startTicks + 1 }, taskPid: child.pid, exitFile: noFile })).toMatchObject({ attached: false, code: 'ESRCH' })
    // A live process that is not a keeper of this start time: this test runner.
    expect(await spawner.attach({ keeper: { pid: process.pid, startTicks: 1 }, taskPid: child.pid, exitFile: noFile })).toMatchObject({ attached: false, code: 'ESRCH' })
    // A pid nobody has: the kernel's largest plus... the largest possible pid is never handed out here.
    const unused = await unusedPid()
    expect(await spawner.attach({ keeper: { pid: unused, startTicks: 1 }, taskPid: child.pid, exitFile: noFile })).toMatchObject({ attached: false, code: 'ESRCH' })
    expect(await spawner.attach({ keeper: { pid: keeper.pid, startTicks: -1 }, taskPid: child.pid, exitFile: noFile })).toMatchObject({ attached: false, code: 'EINVAL' })
    expect(await spawner.attach({ keeper, taskPid: child.pid, exitFile: 'relative/exit.json' })).toMatchObject({ attached: false, code: 'EINVAL' })
    // The helper is still there, and the keeper still watched by it.
    process.kill(child.pid, 'SIGKILL')
    expect(await child.exited).toEqual({ exitCode: null, signal: 'SIGKILL' })
  })

  test('attach fails with ESRCH for a keeper that has exited and is not reaped yet (a zombie), without its exit file: a recovering daemon learns it is gone at once', async () => {
    // A parent that never reaps: its child stays a zombie, start time and all, as a SIGKILLed keeper
    // does until whoever inherited it reaps it.
    const parent = spawn('/usr/bin/python3', ['-c', 'import os, sys, time\npid = os.fork()\nif pid == 0: os._exit(0)\nprint(pid, flush=True)\ntime.sleep(600)'], { stdio: ['ignore', 'pipe', 'inherit'] })
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

  test('a SIGKILLed keeper: its exit is reported unknown (-2), no exit file is left; the task itself is the daemon\'s to kill', async () => {
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

  test('a sandboxed task (bubblewrap --die-with-parent) survives the helper\'s death and dies with its keeper', async () => {
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

  test('a request in the first format (no kind, no exit file) still starts a keeper and reports the exit; a malformed attach is an error', async () => {
    const helper = spawn(binary!, [String(process.pid)], { stdio: ['pipe', 'pipe', 'pipe'] })
    let stdout = ''
    helper.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    const exited = new Promise<number | null>((resolve) => helper.once('close', (code) => resolve(code)))
    helper.stdin.on('error', () => {})
    const frame = (fields: string[]) => {
      const payload = Buffer.from(fields.map((field) => `${field}\0`).join(''))
      const header = Buffer.alloc(4)
      header.writeUInt32LE(payload.length)
      return Buffer.concat([header, payload])
    }
    // The output file is a regular file, as every output file must be (regular.c).
    helper.stdin.write(frame(['7', '/bin/sh', '/', join(freshDir(), 'output.log'), '64', '1000000', '', '', '', '', '3', 'sh', '-c', 'exit 6', '0', '0', '0', '0', '0', '0', '0']))
    const lines = await waitFor('started and exited', () => {
      const said = stdout.split('\n')
      return said.length >= 3 ? said : undefined
    })
    const [, , taskPid, keeperPid, keeperStart] = lines[0]!.split(' ')
    expect(lines[0]).toMatch(/^started 7 \d+ \d+ \d+$/)
    expect(lines[1]).toBe(`exited ${taskPid} 6 0`)
    expect(Number(keeperPid)).toBeGreaterThan(0)
    expect(Number(keeperStart)).toBeGreaterThan(0)
    helper.stdin.end(frame(['attach', '8', 'not-a-pid', '1', '2', '']))
    expect(await exited).toBe(2)
    expect(stdout.split('\n').slice(2)).toEqual(['error keeperPid is not a decimal number', ''])
  })
})

describe('native spawner: a stdin FIFO held by the keeper', () => {
  test('the keeper makes the FIFO (0600) and holds it; the child reads it as fd 0; SIGUSR1 to the keeper is the end of input', async () => {
    const dir = freshDir()
    const stdinFifo = join(dir, 'input.fifo')
    const child = started(await spawner.spawn(request({ file: '/bin/cat', argv: ['cat'], cwd: dir, stdinFifo })))
    leftovers.push(child.pid)
    const keeper = child.keeper!.pid
    const info = statSync(stdinFifo)
    expect(info.isFIFO()).toBe(true)
    expect(info.mode & 0o777).toBe(0o600)
    expect(readlinkSync(`/proc/${child.pid}/fd/0`)).toBe(stdinFifo)
    expect(readdirSync(`/proc/${keeper}/fd`).map((fd) => readlinkSync(`/proc/${keeper}/fd/${fd}`))).toContain(stdinFifo)
    // The keeper now catches SIGUSR1 (it ignores it when it holds no FIFO).
    const caught = BigInt(`0x${/^SigCgt:\s+([0-9a-f]+)$/m.exec(readFileSync(`/proc/${keeper}/status`, 'utf8'))![1]}`)
    expect(caught & (1n << BigInt(constants.signals.SIGUSR1 - 1))).not.toBe(0n)

    const writer = openSync(stdinFifo, fsConstants.O_WRONLY | fsConstants.O_NONBLOCK)
    writeSync(writer, 'through the fifo\n')
    closeSync(writer)
    await waitFor('cat to copy the line', () => readFileSync(join(dir, 'output.log'), 'utf8') === 'through the fifo\n')
    // No writer is left but the keeper: cat still waits.
    expect(isAlive(child.pid)).toBe(true)
    process.kill(keeper, 'SIGUSR1')
    expect(await child.exited).toEqual({ exitCode: 0, signal: null })
    await keeperGone(child.keeper!)
    expect(exitRecord(join(dir, 'exit.json'))).toMatchObject({ pid: child.pid, exitCode: 0 })
  })

  test('a path that is not a FIFO fails at stage stdin, and nothing is left running', async () => {
    const dir = freshDir()
    const stdinFifo = join(dir, 'input.fifo')
    writeFileSync(stdinFifo, 'not a pipe')
    const outcome = await spawner.spawn(request({ file: '/bin/cat', argv: ['cat'], cwd: dir, stdinFifo }))
    expect(outcome).toEqual({ started: false, stage: 'stdin', code: 'ENXIO', message: `the task's stdin pipe is not a FIFO: ${stdinFifo}` })
    expect(existsSync(join(dir, 'output.log'))).toBe(false)
  })

  test('a relative stdinFifo is refused as a bad request without disturbing the helper', async () => {
    const outcome = await spawner.spawn(request({ file: '/bin/true', stdinFifo: 'relative/input.fifo' }))
    expect(outcome).toMatchObject({ started: false, stage: 'request', code: 'EINVAL', message: expect.stringContaining('stdinFifo must be an absolute path') })
    expect((await run(request({ file: '/bin/true' }))).exitCode).toBe(0)
  })
})

describe('native spawner: idmapped folders and a session keyring of its own', () => {
  /** A uid and gid nobody has: what a root daemon's tasks run as. */
  const TASK = { uid: 1879048301, gid: 1879048301 }
  let base: string

  beforeAll(() => {
    // Others may enter it (the child runs as TASK): 0711.
    base = mkdtempSync('/var/tmp/tend-native-idmap-')
    chmodSync(base, 0o711)
  })

  afterAll(() => {
    rmSync(base, { recursive: true, force: true })
  })

  /** A folder owned by `owner`, 0700; and a request whose output and exit files lie elsewhere. */
  function ownedDir(owner = { uid: 0, gid: 0 }): string {
    const dir = mkdtempSync(join(base, 'owned-'))
    chownSync(dir, owner.uid, owner.gid)
    return dir
  }
  function idRequest(cwd: string, overrides: Partial<SpawnRequest> & { file: string }): SpawnRequest {
    const files = freshDir()
    return spawnRequest(cwd, { outputFile: join(files, 'output.log'), exitFile: join(files, 'exit.json'), user: TASK, ...overrides })
  }
  function ownersUnder(dir: string): Record<string, string> {
    const found: Record<string, string> = {}
    const walk = (path: string) => {
      for (const name of readdirSync(path).sort()) {
        const info = lstatSync(join(path, name))
        found[join(path, name).slice(dir.length + 1)] = `${info.uid}:${info.gid}`
        if (info.isDirectory()) walk(join(path, name))
      }
    }
    walk(dir)
    return found
  }

  test("a pinned folder with an owner is idmapped onto the user: the child writes it as that user, and what it makes is the owner's on disk", async () => {
    const dir = ownedDir()
    const result = await run(idRequest(dir, { file: '/bin/sh', argv: ['sh', '-c', 'id -u; mkdir made && echo x > made/file && stat -c %u:%g . made made/file'], pinnedDirs: [mappedPinOf(dir)] }))
    const as = `${TASK.uid}:${TASK.gid}`
    expect(result).toMatchObject({ exitCode: 0, output: `${TASK.uid}\n${as}\n${as}\n${as}\n` })
    expect(ownersUnder(dir)).toEqual({ made: '0:0', 'made/file': '0:0' })
  })

  test("the idmapped mount is the child's alone: the host's mount table never shows it", async () => {
    const dir = ownedDir()
    const child = await startSleeper({ ...idRequest(dir, { file: '/bin/sleep' }), argv: ['sleep', '600'], pinnedDirs: [mappedPinOf(dir)] })
    const own = readFileSync(`/proc/${child.pid}/mountinfo`, 'utf8').split('\n').filter((line) => line.includes(` ${dir} `))
    expect(own.length, own.join('\n')).toBe(1)
    expect(own[0]).toMatch(/\bidmapped\b/)
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(` ${dir} `)
  })

  test("folders inside one another keep each its owner's mapping (the outer one mounted first)", async () => {
    const outer = ownedDir()
    const inner = join(outer, 'inner')
    mkdirSync(inner, { mode: 0o700 })
    chownSync(inner, 4242, 4343)
    const result = await run(idRequest(outer, { file: '/bin/sh', argv: ['sh', '-c', 'echo a > here && echo b > inner/there && stat -c %u:%g inner inner/there'], pinnedDirs: [mappedPinOf(outer), mappedPinOf(inner)] }))
    expect(result).toMatchObject({ exitCode: 0, output: `${TASK.uid}:${TASK.gid}\n${TASK.uid}:${TASK.gid}\n` })
    expect(ownersUnder(outer)).toEqual({ here: '0:0', inner: '4242:4343', 'inner/there': '4242:4343' })
  })

  test("a view shows an owner-only folder to the user read-only: its 0600 file reads, nothing can be written", async () => {
    const home = ownedDir()
    writeFileSync(join(home, '.gitconfig'), '[user]\n\tname = viewed\n', { mode: 0o600 })
    const result = await run(idRequest('/', { file: '/bin/sh', argv: ['sh', '-c', `cat ${home}/.gitconfig; echo x > ${home}/new 2>&1 || true`], idmappedViews: [mappedPinOf(home)] }))
    expect(result.exitCode).toBe(0)
    expect(result.output).toMatch(/^\[user\]\n\tname = viewed\n.*Read-only file system\n$/s)
    expect(readdirSync(home)).toEqual(['.gitconfig'])
  })

  test('a folder on a file system without idmapped mounts (ramfs) fails the spawn at stage idmap, naming it', async () => {
    const mountPoint = ownedDir()
    execFileSync('mount', ['-t', 'ramfs', '-o', 'mode=0700', 'ramfs', mountPoint])
    try {
      const cwd = ownedDir()
      const req = idRequest(cwd, { file: '/bin/true', pinnedDirs: [mappedPinOf(cwd), mappedPinOf(mountPoint)] })
      const outcome = await spawner.spawn(req)
      expect(outcome).toEqual({ started: false, stage: 'idmap', code: 'EINVAL', message: `could not idmap ${mountPoint} for the task's user: EINVAL (its file system, or one mounted inside it, does not support idmapped mounts)` })
    } finally {
      execFileSync('umount', [mountPoint])
    }
  })

  test('a mapped folder whose owner changed since it was pinned fails at stage pinned (ESTALE); one without a user to map to is refused', async () => {
    const dir = ownedDir()
    const pinned = mappedPinOf(dir)
    chownSync(dir, 4242, 4242)
    expect(await spawner.spawn(idRequest(dir, { file: '/bin/true', pinnedDirs: [pinned] }))).toMatchObject({ started: false, stage: 'pinned', code: 'ESTALE' })
    const unmapped = await spawner.spawn(spawnRequest(dir, { file: '/bin/true', outputFile: join(freshDir(), 'out'), pinnedDirs: [mappedPinOf(dir)] }))
    expect(unmapped).toMatchObject({ started: false, stage: 'request', code: 'EINVAL', message: expect.stringContaining('no user to map to') })
  })

  test('the helper makes one user namespace per mapping, and keeps it for the next spawns', async () => {
    const own = await NativeSpawner.start(binary!)
    extraSpawners.push(own)
    const namespaces = () => readdirSync(`/proc/${own.helperPid}/fd`).filter((fd) => { try { return readlinkSync(`/proc/${own.helperPid}/fd/${fd}`).startsWith('user:') } catch { return false } }).length
    const first = ownedDir()
    const second = ownedDir()
    for (const dir of [first, second]) expect((await run(idRequest(dir, { file: '/bin/true', pinnedDirs: [mappedPinOf(dir)] }), own)).exitCode).toBe(0)
    expect(namespaces()).toBe(1)
    const other = ownedDir({ uid: 4242, gid: 4242 })
    expect((await run(idRequest(other, { file: '/bin/true', pinnedDirs: [mappedPinOf(other)] }), own)).exitCode).toBe(0)
    expect(namespaces()).toBe(2)
  })

  test('every child joins a new session keyring of its own, never its helper\'s, never another child\'s; made before the uid changes, it counts against root\'s key quota and the task still possesses it', async () => {
    const describeSession = [
      'import ctypes, platform',
      'libc = ctypes.CDLL(None, use_errno=True)',
      'libc.syscall.restype = ctypes.c_long',
      "KEYCTL = {'x86_64': 250, 'aarch64': 219}[platform.machine()]",
      'serial = libc.syscall(KEYCTL, ctypes.c_long(0), ctypes.c_long(-3), ctypes.c_long(0))',
      'buffer = ctypes.create_string_buffer(256)',
      'libc.syscall(KEYCTL, ctypes.c_long(6), ctypes.c_long(-3), buffer, ctypes.c_long(256))',
      "print(serial, buffer.value.decode(), flush=True)",
    ].join('\n')
    const python = '/usr/bin/python3'
    const outside = execFileSync(python, ['-c', describeSession], { encoding: 'utf8' }).trim().split(' ')[0]
    const asRoot = (await run(request({ file: python, argv: ['python3', '-c', describeSession] }))).output.trim().split(' ')
    const asTask = (await run(idRequest('/', { file: python, argv: ['python3', '-c', describeSession] }))).output.trim().split(' ')
    expect(asRoot[1]).toMatch(/^keyring;0;0;[0-9a-f]+;_ses$/)
    // Described by the task itself: it possesses the keyring, though root made it (and pays for it).
    expect(asTask[1]).toMatch(/^keyring;0;0;[0-9a-f]+;_ses$/)
    expect(new Set([outside, asRoot[0], asTask[0]]).size).toBe(3)
  })
})

describe('native spawner: places hidden by descriptor', () => {
  /** A uid and gid nobody has: what a root daemon's tasks run as. */
  const TASK = { uid: 1879048301, gid: 1879048301 }
  let base: string

  beforeAll(() => {
    // Others may enter it (a child may run as TASK): 0711.
    base = mkdtempSync('/var/tmp/tend-native-hidden-')
    chmodSync(base, 0o711)
  })

  afterAll(() => {
    rmSync(base, { recursive: true, force: true })
  })

  /** A folder of places to hide, 0755, and a request run in a folder of its own (its output and exit files there). */
  function places(): string {
    const dir = mkdtempSync(join(base, 'places-'))
    chmodSync(dir, 0o755)
    return dir
  }
  function hideRequest(overrides: Partial<SpawnRequest> & { file: string }): SpawnRequest {
    const files = freshDir()
    return spawnRequest(files, overrides)
  }
  /** The mount options of the mount on `path` in the child's own table (its mountinfo), or undefined. */
  function optionsAt(mountinfo: string, path: string): string | undefined {
    const line = mountinfo.split('\n').find((each) => each.split(' ')[4] === path)
    return line?.split(' ')[5]
  }

  test('a folder gets an empty read-only folder and a file /dev/null, each mounted over what was opened, in the child\'s mount namespace alone', async () => {
    const dir = places()
    const folder = join(dir, 'ssh')
    mkdirSync(folder, { mode: 0o755 })
    writeFileSync(join(folder, 'id_ed25519'), 'FOLDER-SECRET\n', { mode: 0o644 })
    const file = join(dir, 'hosts.yml')
    writeFileSync(file, 'FILE-SECRET\n', { mode: 0o644 })
    const script = [
      `ls -A ${folder}; echo "listed $?"`,
      `cat ${folder}/id_ed25519 2>/dev/null; echo "folder file $?"`,
      `touch ${folder}/planted 2>/dev/null; echo "planted $?"`,
      `cat ${file} 2>/dev/null; echo "file $?"`,
      `stat -c '%F %t:%T' ${file}`,
      `(echo overwritten > ${file}) 2>/dev/null || echo 'not overwritten'`,
      'echo ---',
      'cat /proc/self/mountinfo',
    ].join('; ')
    const result = await run(hideRequest({ file: '/bin/sh', argv: ['sh', '-c', script], hiddenPaths: [folder, file] }))
    expect(result.exitCode).toBe(0)
    const [report, mountinfo = ''] = result.output.split('---\n')
    expect(report).toBe(['listed 0', 'folder file 1', 'planted 1', 'file 1', 'character special file 1:3', 'not overwritten', ''].join('\n'))
    // Read-only, and nothing on them runs, carries a set-id bit or opens as a device: bubblewrap,
    // which adds these to every mount it binds, has nothing to change on them (no remount by path).
    expect(optionsAt(mountinfo, folder)).toMatch(/^ro,nosuid,nodev,noexec\b/)
    expect(optionsAt(mountinfo, file)).toMatch(/^ro,nosuid,nodev,noexec\b/)
    // The child's alone: the host's table and files are as they were.
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(dir)
    expect(readFileSync(join(folder, 'id_ed25519'), 'utf8')).toBe('FOLDER-SECRET\n')
    expect(readFileSync(file, 'utf8')).toBe('FILE-SECRET\n')
  })

  test('a path that is gone, or holds a symbolic link (as its last part or on its way), is skipped: the task starts, and what the link leads to is not hidden', async () => {
    const dir = places()
    const target = join(dir, 'public')
    mkdirSync(join(target, '.ssh'), { recursive: true, mode: 0o755 })
    writeFileSync(join(target, '.ssh', 'known'), 'PUBLIC\n', { mode: 0o644 })
    writeFileSync(join(target, 'file'), 'PUBLIC-FILE\n', { mode: 0o644 })
    // A home that is a link now, a secret path that is a link itself (to a folder, to a file), and one that is gone.
    symlinkSync(target, join(dir, 'home'))
    symlinkSync(join(target, '.ssh'), join(dir, 'ssh-link'))
    symlinkSync(join(target, 'file'), join(dir, 'file-link'))
    // And one that is there, after them: skipping the others stops nothing.
    const aws = join(dir, 'aws')
    mkdirSync(aws, { mode: 0o755 })
    writeFileSync(join(aws, 'credentials'), 'AWS-SECRET\n', { mode: 0o644 })
    const hidden = [join(dir, 'home', '.ssh'), join(dir, 'ssh-link'), join(dir, 'file-link'), join(dir, 'gone'), join(dir, 'gone', 'deeper'), aws]
    const script = `cat ${dir}/home/.ssh/known ${dir}/ssh-link/known ${dir}/file-link ${target}/.ssh/known ${target}/file; ls -A ${aws}; grep -c ' ${dir}/' /proc/self/mountinfo`
    const result = await run(hideRequest({ file: '/bin/sh', argv: ['sh', '-c', script], hiddenPaths: hidden }))
    expect(result).toMatchObject({ exitCode: 0, signal: null, output: 'PUBLIC\nPUBLIC\nPUBLIC-FILE\nPUBLIC\nPUBLIC-FILE\n1\n' })
  })

  test('a covered file reads as its new contents, read-only, in the child alone; one gone or a link is skipped; a folder is refused at stage hidden', async () => {
    const dir = places()
    const accounts = join(dir, 'passwd')
    writeFileSync(accounts, 'root:x:0:0::/root:/bin/sh\n', { mode: 0o644 })
    const linkTarget = join(dir, 'target')
    writeFileSync(linkTarget, 'TARGET\n', { mode: 0o644 })
    symlinkSync(linkTarget, join(dir, 'link'))
    const covers = [
      { path: accounts, data: Buffer.from('root:x:0:0::/root:/bin/sh\ntend-task:x:4242:4242::/:/bin/sh\n') },
      { path: join(dir, 'gone'), data: Buffer.from('never\n') },
      { path: join(dir, 'link'), data: Buffer.from('never\n') },
    ]
    const script = `cat ${accounts}; (echo more >> ${accounts}) 2>/dev/null || echo 'not written'; cat ${dir}/link; grep -c ' ${dir}/' /proc/self/mountinfo`
    const result = await run(hideRequest({ file: '/bin/sh', argv: ['sh', '-c', script], coveredFiles: covers }))
    expect(result).toMatchObject({ exitCode: 0, output: 'root:x:0:0::/root:/bin/sh\ntend-task:x:4242:4242::/:/bin/sh\nnot written\nTARGET\n1\n' })
    // The host's file is as it was, and its table holds no cover.
    expect(readFileSync(accounts, 'utf8')).toBe('root:x:0:0::/root:/bin/sh\n')
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(dir)
    const folder = join(dir, 'folder')
    mkdirSync(folder)
    const refused = await spawner.spawn(hideRequest({ file: '/bin/true', hiddenPaths: [join(dir, 'gone')], coveredFiles: [{ path: folder, data: Buffer.from('x') }] }))
    expect(refused).toMatchObject({ started: false, stage: 'hidden', code: 'EINVAL', message: `could not hide ${folder} from the task: EINVAL` })
  })

  test('a place inside an idmapped folder is hidden over the idmapped mount (after it), from a child that then runs as another user', async () => {
    const dir = places()
    const inner = join(dir, '.ssh')
    mkdirSync(inner, { mode: 0o755 })
    writeFileSync(join(inner, 'id_ed25519'), 'INNER-SECRET\n', { mode: 0o644 })
    writeFileSync(join(dir, '.netrc'), 'NETRC-SECRET\n', { mode: 0o644 })
    const result = await run(hideRequest({ file: '/bin/sh', argv: ['sh', '-c', `id -u; cat .ssh/id_ed25519 .netrc 2>&1; ls -A .ssh; echo made > made && echo made`], cwd: dir, user: TASK, pinnedDirs: [mappedPinOf(dir)], hiddenPaths: [inner, join(dir, '.netrc')] }))
    expect(result.output).not.toContain('SECRET')
    expect(result.output).toMatch(new RegExp(`^${TASK.uid}\\n.*Permission denied\\nmade\\n$`, 's'))
    expect(lstatSync(join(dir, 'made')).uid).toBe(0)
  })

  test("a helper proves once whether its children can hide places: root's can; one whose children may not make a mount namespace (no CAP_SYS_ADMIN, as in a container) cannot, and says why", async () => {
    const own = await NativeSpawner.start(binary!)
    extraSpawners.push(own)
    expect(own.hidesPaths).toBe(false)
    expect(await own.checkHiding(freshDir())).toBeNull()
    expect(own.hidesPaths).toBe(true)
    // The same helper, started without CAP_SYS_ADMIN in its bounding set (so root without it).
    const wrapper = join(freshDir(), 'spawner-without-sys-admin')
    writeFileSync(wrapper, `#!/bin/sh\nexec setpriv --bounding-set=-sys_admin -- ${binary} "$@"\n`, { mode: 0o755 })
    const capless = await NativeSpawner.start(wrapper)
    extraSpawners.push(capless)
    expect(await capless.checkHiding(freshDir())).toBe('could not give the task a mount namespace of its own to hide places in: EPERM')
    expect(capless.hidesPaths).toBe(false)
  })

  test('hidden paths that are not absolute, or hold a NUL byte, are refused as a bad request without disturbing the helper', async () => {
    const helper = spawner.helperPid
    for (const path of ['relative/.ssh', '/with\0nul', '']) {
      const outcome = await spawner.spawn(hideRequest({ file: '/bin/true', hiddenPaths: [path] }))
      expect(outcome, JSON.stringify(path)).toMatchObject({ started: false, stage: 'request', code: 'EINVAL', message: expect.stringContaining('hiddenPaths[0]') })
    }
    expect((await run(request({ file: '/bin/true' }))).exitCode).toBe(0)
    expect(spawner.helperPid).toBe(helper)
  })
})

describe('readExitFile', () => {
  test('reads an exit and a signal death; anything else is null', () => {
    const dir = freshDir()
    const write = (text: string) => {
      const path = join(dir, `exit-${dirCount++}.json`)
      writeFileSync(path, text)
      return path
    }
    expect(readExitFile(write('{"pid":12,"exitCode":0,"signal":null,"endedAtMs":1700000000000}\n'))).toEqual({ pid: 12, exitCode: 0, signal: null, endedAt: '2023-11-14T22:13:20.000Z' })
    expect(readExitFile(write('{"pid":12,"exitCode":null,"signal":9,"endedAtMs":1700000000000}'))).toEqual({ pid: 12, exitCode: null, signal: 'SIGKILL', endedAt: '2023-11-14T22:13:20.000Z' })
    expect(readExitFile(write('{"pid":12,"exitCode":null,"signal":40,"endedAtMs":1}'))).toMatchObject({ signal: 'SIG40' })
    for (const bad of [
      '',
      '{"pid":12,"exitCode":0,"signal":null',
      '{"pid":12,"exitCode":null,"signal":null,"endedAtMs":1}',
      '{"pid":12,"exitCode":1,"signal":9,"endedAtMs":1}',
      '{"pid":12,"exitCode":256,"signal":null,"endedAtMs":1}',
      '{"pid":12,"exitCode":null,"signal":0,"endedAtMs":1}',
      '{"pid":0,"exitCode":0,"signal":null,"endedAtMs":1}',
      '{"pid":12,"exitCode":0,"signal":null}',
      '{"pid":"12","exitCode":0,"signal":null,"endedAtMs":1}',
      '[12,0,null,1]',
      'null',
    ]) {
      expect(readExitFile(write(bad)), bad).toBeNull()
    }
    expect(readExitFile(join(dir, 'missing.json'))).toBeNull()
    expect(readExitFile(dir)).toBeNull()
  })
})

/** Pids whose parent is `pid`. */
function childrenOf(pid: number): number[] {
  const children: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (Number(procStat(Number(entry))[1]) === pid) children.push(Number(entry))
    } catch {
      // gone
    }
  }
  return children
}

/** A pid no process has: the top of the kernel's range, checked. */
async function unusedPid(): Promise<number> {
  const max = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'))
  for (let pid = max - 1; pid > 1; pid--) if (!existsSync(`/proc/${pid}`)) return pid
  throw new Error('no unused pid')
}
