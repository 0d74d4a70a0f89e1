import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { execFileSync, spawn } from 'node:child_process'
import { chmodSync, chownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { NativeSpawner } from '../../../daemon/spawn/native-spawner.js'
import type { SpawnRequest } from '../../../daemon/spawn/spawner.js'
import { spawnRequest } from '../../helpers/spawn-request.js'
import { binary, extraSpawners, freshDir, mappedPinOf, request, run, spawner, started, startSleeper, useNativeSpawner } from './native-fixture.js'

/** The native spawner: idmapped folders and a session keyring of its own. */

useNativeSpawner()

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
    const result = await run(
      idRequest(dir, {
        file: '/bin/sh',
        argv: ['sh', '-c', 'id -u; mkdir made && echo x > made/file && stat -c %u:%g . made made/file'],
        pinnedDirs: [mappedPinOf(dir)],
      }),
    )
    const as = `${TASK.uid}:${TASK.gid}`
    expect(result).toMatchObject({ exitCode: 0, output: `${TASK.uid}\n${as}\n${as}\n${as}\n` })
    expect(ownersUnder(dir)).toEqual({ made: '0:0', 'made/file': '0:0' })
  })

  test("the idmapped mount is the child's alone: the host's mount table never shows it", async () => {
    const dir = ownedDir()
    const child = await startSleeper({ ...idRequest(dir, { file: '/bin/sleep' }), argv: ['sleep', '600'], pinnedDirs: [mappedPinOf(dir)] })
    const own = readFileSync(`/proc/${child.pid}/mountinfo`, 'utf8')
      .split('\n')
      .filter((line) => line.includes(` ${dir} `))
    expect(own.length, own.join('\n')).toBe(1)
    expect(own[0]).toMatch(/\bidmapped\b/)
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(` ${dir} `)
  })

  test("folders inside one another keep each its owner's mapping (the outer one mounted first)", async () => {
    const outer = ownedDir()
    const inner = join(outer, 'inner')
    mkdirSync(inner, { mode: 0o700 })
    chownSync(inner, 4242, 4343)
    const result = await run(
      idRequest(outer, {
        file: '/bin/sh',
        argv: ['sh', '-c', 'echo a > here && echo b > inner/there && stat -c %u:%g inner inner/there'],
        pinnedDirs: [mappedPinOf(outer), mappedPinOf(inner)],
      }),
    )
    expect(result).toMatchObject({ exitCode: 0, output: `${TASK.uid}:${TASK.gid}\n${TASK.uid}:${TASK.gid}\n` })
    expect(ownersUnder(outer)).toEqual({ here: '0:0', inner: '4242:4343', 'inner/there': '4242:4343' })
  })

  test('a view shows an owner-only folder to the user read-only: its 0600 file reads, nothing can be written', async () => {
    const home = ownedDir()
    writeFileSync(join(home, '.gitconfig'), '[user]\n\tname = viewed\n', { mode: 0o600 })
    const result = await run(
      idRequest('/', { file: '/bin/sh', argv: ['sh', '-c', `cat ${home}/.gitconfig; echo x > ${home}/new 2>&1 || true`], idmappedViews: [mappedPinOf(home)] }),
    )
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
      expect(outcome).toEqual({
        started: false,
        stage: 'idmap',
        code: 'EINVAL',
        message: `could not idmap ${mountPoint} for the task's user: EINVAL (its file system, or one mounted inside it, does not support idmapped mounts)`,
      })
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
    const namespaces = () =>
      readdirSync(`/proc/${own.helperPid}/fd`).filter((fd) => {
        try {
          return readlinkSync(`/proc/${own.helperPid}/fd/${fd}`).startsWith('user:')
        } catch {
          return false
        }
      }).length
    const first = ownedDir()
    const second = ownedDir()
    for (const dir of [first, second]) expect((await run(idRequest(dir, { file: '/bin/true', pinnedDirs: [mappedPinOf(dir)] }), own)).exitCode).toBe(0)
    expect(namespaces()).toBe(1)
    const other = ownedDir({ uid: 4242, gid: 4242 })
    expect((await run(idRequest(other, { file: '/bin/true', pinnedDirs: [mappedPinOf(other)] }), own)).exitCode).toBe(0)
    expect(namespaces()).toBe(2)
  })

  test("every child joins a new session keyring of its own, never its helper's, never another child's; made before the uid changes, it counts against root's key quota and the task still possesses it", async () => {
    const describeSession = [
      'import ctypes, platform',
      'libc = ctypes.CDLL(None, use_errno=True)',
      'libc.syscall.restype = ctypes.c_long',
      "KEYCTL = {'x86_64': 250, 'aarch64': 219}[platform.machine()]",
      'serial = libc.syscall(KEYCTL, ctypes.c_long(0), ctypes.c_long(-3), ctypes.c_long(0))',
      'buffer = ctypes.create_string_buffer(256)',
      'libc.syscall(KEYCTL, ctypes.c_long(6), ctypes.c_long(-3), buffer, ctypes.c_long(256))',
      'print(serial, buffer.value.decode(), flush=True)',
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
