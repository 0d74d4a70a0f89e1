import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { spawn } from 'node:child_process'
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
// The built module: the helper binary is found next to it, in dist/daemon/spawner/.
import { NativeSpawner } from '../../dist/daemon/native-spawner.js'
import type { SpawnExit, SpawnOutcome, SpawnRequest } from '../../daemon/spawner.js'
import { isAlive } from '../helpers/processes.js'
import { REPO_ROOT } from '../helpers/test-daemon.js'
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
  if (!binary) throw new Error('dist/daemon/spawner/tend-spawner is missing: run `npm run build` (it needs a C compiler)')
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
  const dir = overrides.cwd ?? freshDir()
  return {
    argv: [overrides.file],
    env: {},
    cwd: dir,
    outputFile: join(dir, 'output.log'),
    extraFiles: [],
    cgroupProcs: [],
    limits: { openFiles: 1024, fileSizeBytes: 1024 * 1024 * 1024 },
    ...overrides,
  }
}

function started(outcome: SpawnOutcome): { pid: number; exited: Promise<SpawnExit> } {
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
async function startSleeper(req: Partial<SpawnRequest> = {}, using: NativeSpawner = spawner): Promise<{ pid: number; exited: Promise<SpawnExit>; req: SpawnRequest }> {
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
  test('binaryPath finds the built helper next to the compiled module', () => {
    expect(binary).toBe(join(REPO_ROOT, 'dist', 'daemon', 'spawner', 'tend-spawner'))
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

  test('the child leads a new session and process group', async () => {
    const child = await startSleeper()
    const [, ppid, pgrp, session] = procStat(child.pid)
    expect(Number(pgrp)).toBe(child.pid)
    expect(Number(session)).toBe(child.pid)
    expect(Number(ppid)).toBe(spawner.helperPid)
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

  test('the child writes its pid to every cgroup.procs file before it execs', async () => {
    const dir = freshDir()
    const procs = [join(dir, 'memory.procs'), join(dir, 'pids.procs')]
    for (const file of procs) writeFileSync(file, '')
    const result = await run(request({ file: '/bin/true', argv: ['true'], cwd: dir, cgroupProcs: procs }))
    expect(result.exitCode).toBe(0)
    for (const file of procs) expect(readFileSync(file, 'utf8').trim()).toBe(String(result.pid))
  })

  test('a cgroup that cannot be joined fails at stage cgroup, naming the file, before the output is opened', async () => {
    const dir = freshDir()
    const good = join(dir, 'good.procs')
    writeFileSync(good, '')
    const missing = join(dir, 'missing', 'cgroup.procs')
    const req = request({ file: '/bin/true', cwd: dir, cgroupProcs: [good, missing] })
    const outcome = await spawner.spawn(req)
    expect(outcome).toEqual({ started: false, stage: 'cgroup', code: 'ENOENT', message: `could not join cgroup ${missing}: ENOENT` })
    expect(existsSync(req.outputFile)).toBe(false)
    // A directory cannot be opened for writing, even by root.
    const unwritable = await spawner.spawn(request({ file: '/bin/true', cgroupProcs: [dir] }))
    expect(unwritable).toMatchObject({ started: false, stage: 'cgroup', code: 'EISDIR', message: `could not join cgroup ${dir}: EISDIR` })
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

  test('when the helper is killed, pending spawns fail, running children\'s exits reject, and the next spawn restarts it', async () => {
    const own = await NativeSpawner.start(binary!)
    extraSpawners.push(own)
    const child = await startSleeper({}, own)
    const exitError = child.exited.then(
      () => null,
      (error: Error) => error,
    )
    const firstHelper = own.helperPid!
    // Stopped first, so the request below is certainly still unanswered when the helper dies.
    process.kill(firstHelper, 'SIGSTOP')
    const pending = own.spawn(request({ file: '/bin/true' }))
    process.kill(firstHelper, 'SIGKILL')

    expect(await pending).toMatchObject({ started: false, stage: 'spawner', code: 'ESPAWNER' })
    const error = await exitError
    expect(error).toBeInstanceOf(Error)
    expect(error!.message).toMatch(/spawner died/)
    await waitFor('the killed helper to be gone', () => !isAlive(firstHelper), 5000)
    // The child itself is untouched (the daemon decides what to do with it).
    expect(isAlive(child.pid)).toBe(true)

    const result = await run(request({ file: '/bin/sh', argv: ['sh', '-c', 'exit 7'] }), own)
    expect(result.exitCode).toBe(7)
    expect(own.helperPid).toBeDefined()
    expect(own.helperPid).not.toBe(firstHelper)
  })

  test('close() stops the helper, leaves running children alone, and refuses later spawns', async () => {
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
    expect((await exitError)?.message).toMatch(/spawner was closed/)
    expect(await own.spawn(request({ file: '/bin/true' }))).toMatchObject({ started: false, stage: 'spawner', code: 'ESPAWNER' })
    expect(own.helperPid).toBeUndefined()
  })

  test('the helper dies with the process that started it', async () => {
    const script = [
      `import { NativeSpawner } from ${JSON.stringify(join(REPO_ROOT, 'dist', 'daemon', 'native-spawner.js'))}`,
      'const spawner = await NativeSpawner.start(NativeSpawner.binaryPath())',
      'console.log(spawner.helperPid)',
      'setInterval(() => {}, 1000)',
    ].join('\n')
    const owner = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let stdout = ''
    owner.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    const ownerGone = new Promise((resolve) => owner.once('close', resolve))
    const helper = await waitFor('the owner to print its helper pid', () => Number(stdout.split('\n')[0]) || undefined)
    expect(isAlive(helper)).toBe(true)
    owner.kill('SIGKILL')
    await ownerGone
    await waitFor(`helper ${helper} to die with its owner`, () => !isAlive(helper), 5000)
  })
})

describe('native spawner: descriptors for bubblewrap, and its own environment', () => {
  test('the helper runs with a fixed minimal environment, not the daemon\'s', async () => {
    const own = await NativeSpawner.start(binary!)
    extraSpawners.push(own)
    const environ = readFileSync(`/proc/${own.helperPid}/environ`, 'latin1')
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
    // No cwd identity, no user, argv [true], no env, extra files, cgroups or pins, one blob of 100 bytes holding 3.
    const fields = ['1', '/bin/true', '/tmp', '/tmp/x', '64', '1000', '', '', '', '', '1', 'true', '0', '0', '0', '0', '1', '100']
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

function pinOf(path: string): { path: string; dev: string; ino: string } {
  const info = statSync(path, { bigint: true })
  return { path, dev: String(info.dev), ino: String(info.ino) }
}
