import { describe, expect, test } from 'vitest'
import { spawn } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, readFileSync, readlinkSync, realpathSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { NativeSpawner } from '../../../daemon/spawn/native-spawner.js'
import { TaskCgroups } from '../../../daemon/sandbox/cgroups.js'
import { REPO_ROOT } from '../../helpers/test-daemon.js'
import { waitFor } from '../../helpers/wait-for.js'
import {
  binary,
  expectOpenDescriptors,
  extraSpawners,
  freshDir,
  groupOf,
  pinOf,
  procStat,
  removeCgroup,
  request,
  run,
  spawner,
  started,
  startSleeper,
  useNativeSpawner,
} from './native-fixture.js'

/** What the native spawner's child gets: argv, env, cwd, descriptors, session, limits, cgroups, and the stage of a start that fails. */

useNativeSpawner()

describe('native spawner: the child', () => {
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
    expect(result.output).toBe(
      Object.entries(env)
        .map(([key, value]) => `${key}=${value}\0`)
        .join(''),
    )
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

  test("a bare name is searched on the PATH of the given env, not the helper's", async () => {
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

  test("the child leads a new session and process group; its parent is its keeper, the helper's child", async () => {
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

    const result = await run(
      request({ file: '/bin/sh', argv: ['sh', '-c', 'cat <&3; cat <&4; echo x >&3 2>/dev/null || echo read-only'], extraFiles: [first, second] }),
    )
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
    const result = await run(
      request({
        file: '/bin/sh',
        argv: ['sh', '-c', 'ulimit -n; ulimit -Hn; ulimit -f; ulimit -Hf; ulimit -c; ulimit -Hc'],
        limits: { openFiles: 321, fileSizeBytes: 512 * 777 },
      }),
    )
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

  test("a task is in its cgroup from its first instruction: the child joins through the group's tasks file", async () => {
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
      expect(outcome).toMatchObject({
        started: false,
        stage: 'cgroup',
        code: 'ESTALE',
        message: expect.stringContaining(`could not join cgroup ${made!.path}: it is no longer the folder the daemon made`),
      })
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
    expect(await spawner.spawn(request({ file: missing, cwd: dir }))).toEqual({
      started: false,
      stage: 'exec',
      code: 'ENOENT',
      message: `no such program: ${missing}`,
    })
    const plain = join(dir, 'plain.sh')
    writeFileSync(plain, '#!/bin/sh\necho nope\n')
    chmodSync(plain, 0o644)
    expect(await spawner.spawn(request({ file: plain, cwd: dir }))).toEqual({
      started: false,
      stage: 'exec',
      code: 'EACCES',
      message: `program is not executable: ${plain}`,
    })
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
})

describe('native spawner: descriptors for bubblewrap, and its own environment', () => {
  test("the helper runs with a fixed minimal environment, not the daemon's", async () => {
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
    const result = await run(
      request({
        file: '/bin/sh',
        argv: ['sh', '-c', 'cat <&3; echo x >&3 2>/dev/null || echo read-only; echo x >>/proc/self/fd/3 2>/dev/null || echo sealed'],
        dataFiles: [Buffer.from('data\n')],
      }),
    )
    expect(result).toMatchObject({ exitCode: 0, output: 'data\nread-only\nsealed\n' })
  })

  test('the failing pinned folder is named among several; earlier ones are not blamed', async () => {
    const first = freshDir()
    const second = freshDir()
    const pins = [pinOf(first), pinOf(second)]
    rmSync(second, { recursive: true })
    const outcome = await spawner.spawn(request({ file: '/bin/true', pinnedDirs: pins }))
    expect(outcome).toEqual({
      started: false,
      stage: 'pinned',
      code: 'ENOENT',
      message: `folder changed since the task was accepted: ${second} (it no longer exists)`,
    })
  })

  test('more descriptors than the wire carries are refused as a bad request without disturbing the helper', async () => {
    const helper = spawner.helperPid
    const outcome = await spawner.spawn(request({ file: '/bin/true', dataFiles: Array.from({ length: 1025 }, () => Buffer.alloc(0)) }))
    expect(outcome).toMatchObject({ started: false, stage: 'request', code: 'EINVAL' })
    expect((await run(request({ file: '/bin/true' }))).exitCode).toBe(0)
    expect(spawner.helperPid).toBe(helper)
  })
})
