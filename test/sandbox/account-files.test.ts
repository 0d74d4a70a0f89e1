import { afterEach, describe, expect, test } from 'vitest'
import { execFileSync } from 'node:child_process'
import { chmodSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { AccountFileCache } from '../../daemon/sandbox/account-files.js'
import { trustingGivenRepositories } from '../../daemon/sandbox/git-trust.js'
import type { PinnedPath } from '../../daemon/sandbox/path-policy.js'

/*
 * The sandbox's account files (daemon/sandbox/account-files.ts) built from real files, and the git
 * trust added to a task's environment (git-trust.ts) as a real git reads it.
 */

const USER = { uid: 2_000_000_001, gid: 2_000_000_001 }
const HOST_PASSWD = 'root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh'
const HOST_GROUP = 'root:x:0:\nalice:x:1000:'

describe('account files', () => {
  const dirs: string[] = []
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
  })

  function hostFiles(passwd: string | null, group: string | null): { passwd: string; group: string } {
    const dir = mkdtempSync(join(tmpdir(), 'tend-accounts-'))
    dirs.push(dir)
    const paths = { passwd: join(dir, 'passwd'), group: join(dir, 'group') }
    if (passwd !== null) writeFileSync(paths.passwd, passwd)
    if (group !== null) writeFileSync(paths.group, group)
    return paths
  }

  test("the host's entries, then one for the task's uid and gid with its HOME", () => {
    const files = new AccountFileCache(hostFiles(HOST_PASSWD, HOST_GROUP)).filesFor(USER, '/work/home')
    expect(files.passwd.toString()).toBe(`${HOST_PASSWD}\ntend-task:x:${USER.uid}:${USER.gid}:tend task:/work/home:/bin/sh\n`)
    expect(files.group.toString()).toBe(`${HOST_GROUP}\ntend-task:x:${USER.gid}:\n`)
  })

  test('the host files are read once, and again only after they change', () => {
    const paths = hostFiles(HOST_PASSWD, HOST_GROUP)
    const cache = new AccountFileCache(paths)
    const first = cache.filesFor(USER, '/home')
    for (let task = 0; task < 5; task++) expect(cache.filesFor(USER, '/home')).toEqual(first)
    expect(cache.reads).toBe(2)
    writeFileSync(paths.passwd, `${HOST_PASSWD}\nbob:x:1001:1001::/home/bob:/bin/sh\n`)
    expect(cache.filesFor(USER, '/home').passwd.toString()).toContain('\nbob:x:1001:1001::/home/bob:/bin/sh\ntend-task:x:')
    expect(cache.reads).toBe(3)
  })

  test('a name the host already has is not given twice; a HOME unfit for the file, or none, reads /', () => {
    const cache = new AccountFileCache(hostFiles(`${HOST_PASSWD}\ntend-task:x:999:999::/:/bin/sh\n`, HOST_GROUP))
    const planted = cache.filesFor(USER, '/x\nroot2::0:0::/:/bin/sh')
    expect(planted.passwd.toString().split('\n').slice(-2)).toEqual([`tend-task-${USER.uid}:x:${USER.uid}:${USER.gid}:tend task:/:/bin/sh`, ''])
    expect(planted.group.toString().endsWith(`\ntend-task:x:${USER.gid}:\n`)).toBe(true)
    for (const home of ['/a:b', 'relative', undefined, '']) expect(cache.filesFor(USER, home).passwd.toString()).toMatch(/:tend task:\/:\/bin\/sh\n$/)
  })

  test('without host files, the task entry alone', () => {
    const files = new AccountFileCache(hostFiles(null, null)).filesFor(USER, '/home')
    expect(files.passwd.toString()).toBe(`tend-task:x:${USER.uid}:${USER.gid}:tend task:/home:/bin/sh\n`)
    expect(files.group.toString()).toBe(`tend-task:x:${USER.gid}:\n`)
  })
})

describe("git's trust in a task's environment", () => {
  const git = (env: Record<string, string>, cwd: string, ...args: string[]) =>
    execFileSync('git', args, {
      cwd,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent', GIT_CONFIG_NOSYSTEM: '1', ...env },
    })
  const roots: string[] = []
  afterEach(() => {
    for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true })
  })

  /** Folders under a fresh root, each made with its mode, and pinned as the path policy pins them. */
  function pinned(modes: Record<string, number>): { root: string; folders: Record<string, PinnedPath> } {
    const root = mkdtempSync(join(tmpdir(), 'tend-git-trust-'))
    roots.push(root)
    const folders: Record<string, PinnedPath> = {}
    for (const [name, mode] of Object.entries(modes)) {
      const path = join(root, name)
      mkdirSync(path, { recursive: true })
      chmodSync(path, mode)
      const info = statSync(path, { bigint: true })
      folders[name] = { path, dev: String(info.dev), ino: String(info.ino), uid: Number(info.uid), gid: Number(info.gid) }
    }
    return { root, folders }
  }

  test('each folder only its owner may write is a safe.directory, after those the task gives; one others may write, or one swapped since, is not', () => {
    const { folders } = pinned({ tree: 0o755, 'tree/sub': 0o700, shared: 0o775, open: 0o1777, swapped: 0o755 })
    // Moved aside (its inode stays in use) and replaced.
    renameSync(folders.swapped!.path, `${folders.swapped!.path}-moved`)
    mkdirSync(folders.swapped!.path, { mode: 0o755 })
    const given = {
      GIT_CONFIG_COUNT: '2',
      GIT_CONFIG_KEY_0: 'user.name',
      GIT_CONFIG_VALUE_0: 'Task',
      GIT_CONFIG_KEY_1: 'safe.directory',
      GIT_CONFIG_VALUE_1: '/only/this',
    }
    const env = trustingGivenRepositories(given, Object.values(folders))
    expect(git(env, '/', 'config', '--get-all', 'safe.directory')).toBe(`/only/this\n${folders.tree!.path}\n${folders['tree/sub']!.path}\n`)
    expect(git(env, '/', 'config', 'user.name')).toBe('Task\n')
  })

  test("git climbs no higher than the folders' parents: a repository above them is not found", () => {
    const { root, folders } = pinned({ 'repo/given': 0o755, 'repo/given/inner': 0o755, 'repo/other': 0o755 })
    git({}, join(root, 'repo'), 'init', '-q')
    const env = trustingGivenRepositories({ GIT_CEILING_DIRECTORIES: '/somewhere' }, [
      folders['repo/given']!,
      folders['repo/given/inner']!,
      folders['repo/other']!,
    ])
    // One ceiling per parent of an outermost folder, after the task's own.
    expect(env.GIT_CEILING_DIRECTORIES).toBe(`/somewhere:${join(root, 'repo')}`)
    expect(() => git(env, folders['repo/given/inner']!.path, 'rev-parse', '--show-toplevel')).toThrow(/not a git repository/)
    expect(git({}, folders['repo/given/inner']!.path, 'rev-parse', '--show-toplevel')).toBe(`${join(root, 'repo')}\n`)
  })

  test('a count git would refuse is left as the task gave it; nothing is trusted for no folder', () => {
    expect(trustingGivenRepositories({ GIT_CONFIG_COUNT: 'many', PATH: '/bin' }, [])).toEqual({ GIT_CONFIG_COUNT: 'many', PATH: '/bin' })
    expect(trustingGivenRepositories({ PATH: '/bin' }, [])).toEqual({ PATH: '/bin' })
  })
})
