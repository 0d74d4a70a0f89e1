import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { NativeSpawner } from '../../../daemon/spawn/native-spawner.js'
import type { SpawnRequest } from '../../../daemon/spawn/spawner.js'
import { spawnRequest } from '../../helpers/spawn-request.js'
import { binary, extraSpawners, freshDir, mappedPinOf, request, run, spawner, started, useNativeSpawner } from './native-fixture.js'

/** The native spawner: places hidden by descriptor. */

useNativeSpawner()

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

  test("a folder gets an empty read-only folder and a file /dev/null, each mounted over what was opened, in the child's mount namespace alone", async () => {
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
    const refused = await spawner.spawn(
      hideRequest({ file: '/bin/true', hiddenPaths: [join(dir, 'gone')], coveredFiles: [{ path: folder, data: Buffer.from('x') }] }),
    )
    expect(refused).toMatchObject({ started: false, stage: 'hidden', code: 'EINVAL', message: `could not hide ${folder} from the task: EINVAL` })
  })

  test('a place inside an idmapped folder is hidden over the idmapped mount (after it), from a child that then runs as another user', async () => {
    const dir = places()
    const inner = join(dir, '.ssh')
    mkdirSync(inner, { mode: 0o755 })
    writeFileSync(join(inner, 'id_ed25519'), 'INNER-SECRET\n', { mode: 0o644 })
    writeFileSync(join(dir, '.netrc'), 'NETRC-SECRET\n', { mode: 0o644 })
    const result = await run(
      hideRequest({
        file: '/bin/sh',
        argv: ['sh', '-c', `id -u; cat .ssh/id_ed25519 .netrc 2>&1; ls -A .ssh; echo made > made && echo made`],
        cwd: dir,
        user: TASK,
        pinnedDirs: [mappedPinOf(dir)],
        hiddenPaths: [inner, join(dir, '.netrc')],
      }),
    )
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
      expect(outcome, JSON.stringify(path)).toMatchObject({
        started: false,
        stage: 'request',
        code: 'EINVAL',
        message: expect.stringContaining('hiddenPaths[0]'),
      })
    }
    expect((await run(request({ file: '/bin/true' }))).exitCode).toBe(0)
    expect(spawner.helperPid).toBe(helper)
  })
})
