import { afterEach, describe, expect, test } from 'vitest'
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chooseHierarchy, findTaskCgroupRoots } from '../../daemon/sandbox/cgroup-hierarchy.js'
import { cgroup2Mount, findUnifiedRoot } from '../../daemon/sandbox/cgroup-v2-root.js'
import { TaskCgroups } from '../../daemon/sandbox/cgroups.js'

/*
 * The discovery of a daemon's cgroup v2 subtree and its task groups' limit files, on FAKE trees: a
 * temp folder laid out with the files a cgroup2 folder has (cgroup.controllers,
 * cgroup.subtree_control, cgroup.procs). Everything the kernel decides (moves, limits enforced) is
 * in test/sandbox/cgroup-v2-host.test.ts, on a real cgroup2 mount.
 */

const OTHER_UID = 4242
const made: string[] = []

afterEach(() => {
  for (const folder of made.splice(0)) rmSync(folder, { recursive: true, force: true })
})

/** A fake cgroup2 tree: <mount>/tend.slice with the given controllers available to it. */
function fakeTree(controllers: string, options: { owner?: number; daemonFolder?: string } = {}): { mount: string; subtree: string } {
  const mount = mkdtempSync(join(tmpdir(), 'tend-fake-cgroup2-'))
  made.push(mount)
  chmodSync(mount, 0o755)
  // Every cgroup2 folder has these; the hierarchy's root is root's, 0644 (files) as the kernel makes them.
  for (const name of ['cgroup.procs', 'cgroup.threads', 'cgroup.subtree_control']) writeFileSync(join(mount, name), '', { mode: 0o644 })
  const subtree = join(mount, 'tend.slice')
  mkdirSync(subtree, { mode: 0o755 })
  for (const [name, text] of [
    ['cgroup.controllers', controllers],
    ['cgroup.subtree_control', ''],
    ['cgroup.procs', ''],
    ['cgroup.threads', ''],
  ] as const)
    writeFileSync(join(subtree, name), text, { mode: 0o644 })
  if (options.daemonFolder) {
    // The kernel gives a child its parent's enabled controllers: the fake's daemon folder is made with them.
    const daemon = join(subtree, options.daemonFolder)
    mkdirSync(daemon, { mode: 0o755 })
    writeFileSync(join(daemon, 'cgroup.controllers'), controllers)
    writeFileSync(join(daemon, 'cgroup.subtree_control'), '')
  }
  if (options.owner !== undefined) {
    chownSync(subtree, options.owner, -1)
    if (options.daemonFolder) chownSync(join(subtree, options.daemonFolder), options.owner, -1)
  }
  return { mount, subtree }
}

const within = (mount: string) => (path: string) => path === mount || path.startsWith(`${mount}/`)

describe('the cgroup v2 subtree a daemon is given', () => {
  test('a delegated folder is used: its controllers are enabled for the daemon folder and its task groups', () => {
    const { mount, subtree } = fakeTree('cpuset memory pids io hugetlb', { daemonFolder: 'home-1' })
    const found = findUnifiedRoot({ setting: subtree, uid: 0, daemon: 'home-1', isCgroup2: within(mount), pidsMax: 500 })
    expect(found).toEqual({
      root: expect.objectContaining({ path: join(subtree, 'home-1'), subtree, controllers: ['memory', 'pids', 'io'], allTasksPidsMax: 500 }),
    })
    expect(readFileSync(join(subtree, 'cgroup.subtree_control'), 'utf8')).toBe('+memory +pids +io')
    expect(readFileSync(join(subtree, 'home-1', 'pids.max'), 'utf8')).toBe('500')
  })

  test("a folder whose cgroup.procs is not the daemon's uid's is refused: it was not delegated", () => {
    const { mount, subtree } = fakeTree('memory pids', { owner: OTHER_UID })
    const found = findUnifiedRoot({ setting: subtree, uid: OTHER_UID, daemon: 'home-1', isCgroup2: within(mount) })
    expect(found).toEqual({ problem: expect.stringContaining(`${join(subtree, 'cgroup.procs')} is owned by uid 0, not the daemon's uid ${OTHER_UID}`) })
  })

  test('a folder others can write is refused', () => {
    const { mount, subtree } = fakeTree('memory pids')
    chmodSync(subtree, 0o777)
    const found = findUnifiedRoot({ setting: subtree, uid: 0, daemon: 'home-1', isCgroup2: within(mount) })
    expect(found).toEqual({ problem: expect.stringContaining(`${subtree} is writable by its group or by others`) })
  })

  test('a root daemon refuses a subtree where another uid may move processes: a control file of it, or of a folder above it, owned by or writable for others', () => {
    // cgroup v2 lets whoever may write the cgroup.procs of two groups' common ancestor move any
    // process between them: a root task's out of its group included.
    const cases: Array<[string, (mount: string, subtree: string) => void, string]> = [
      ['cgroup.procs owned by another uid', (_, subtree) => chownSync(join(subtree, 'cgroup.procs'), OTHER_UID, -1), 'cgroup.procs is owned by uid 4242'],
      ['cgroup.threads owned by another uid', (_, subtree) => chownSync(join(subtree, 'cgroup.threads'), OTHER_UID, -1), 'cgroup.threads is owned by uid 4242'],
      [
        "the mount's cgroup.procs writable by all",
        (mount) => chmodSync(join(mount, 'cgroup.procs'), 0o666),
        'cgroup.procs is writable by its group or by others',
      ],
      [
        "the mount's cgroup.subtree_control owned by another uid",
        (mount) => chownSync(join(mount, 'cgroup.subtree_control'), OTHER_UID, -1),
        'cgroup.subtree_control is owned by uid 4242',
      ],
    ]
    for (const [name, spoil, said] of cases) {
      const { mount, subtree } = fakeTree('memory pids')
      spoil(mount, subtree)
      const found = findUnifiedRoot({ setting: subtree, uid: 0, daemon: 'home-1', isCgroup2: within(mount) })
      expect(found, name).toEqual({ problem: expect.stringContaining(said) })
    }
  })

  test('a folder that is not on cgroup2 is refused', () => {
    const { subtree } = fakeTree('memory pids')
    expect(findUnifiedRoot({ setting: subtree, uid: 0, daemon: 'home-1' })).toEqual({ problem: `${subtree} is not on a cgroup2 file system` })
  })

  test("the daemon's own cgroup is refused when it is the hierarchy's root", () => {
    expect(findUnifiedRoot({ setting: 'own', uid: 0, daemon: 'home-1', procSelfCgroup: '0::/\n' })).toEqual({
      problem: expect.stringContaining("the daemon's own cgroup is the root of the hierarchy"),
    })
  })

  test("the daemon's own cgroup is used once the daemon moved to its leaf", () => {
    const { mount, subtree } = fakeTree('memory pids', { daemonFolder: 'home-1' })
    writeFileSync(join(subtree, 'cgroup.procs'), '777\n')
    const mountInfo = `30 25 0:26 / ${mount} rw,nosuid - cgroup2 cgroup2 rw\n`
    const found = findUnifiedRoot({ setting: 'own', uid: 0, daemon: 'home-1', isCgroup2: within(mount), procSelfCgroup: '0::/tend.slice\n', mountInfo })
    expect(found).toEqual({
      root: expect.objectContaining({ subtree, controllers: ['memory', 'pids'], why: "the daemon's own cgroup /tend.slice, delegated to it" }),
    })
    expect(readFileSync(join(subtree, 'daemon', 'cgroup.procs'), 'utf8')).toBe('777')
  })

  test('the cgroup2 mount is read from mountinfo', () => {
    expect(cgroup2Mount('24 1 0:22 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n25 1 0:23 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n')).toBe(
      '/sys/fs/cgroup/unified',
    )
    expect(cgroup2Mount('25 1 0:23 /sub /mnt rw - cgroup2 cgroup2 rw\n')).toBeNull()
  })
})

describe('which hierarchy holds the limits', () => {
  const root = (controllers: string[]) => ({
    root: { path: '/cg/tend/home-1', subtree: '/cg/tend', controllers, why: 'the folder the operator delegated (cgroupRoot)', allTasksPidsMax: null },
  })
  const v1 = { memory: '/sys/fs/cgroup/memory/tend/0/home-1', pids: '/sys/fs/cgroup/pids/tend/0/home-1', problem: null }

  test('a subtree with memory and pids holds the limits itself', () => {
    expect(chooseHierarchy(null, root(['memory', 'pids']))).toMatchObject({
      memory: '/cg/tend/home-1',
      pids: '/cg/tend/home-1',
      problem: null,
      hierarchy: { version: 2, limits: 2, path: '/cg/tend/home-1' },
    })
  })

  test('a subtree without them on a hybrid host leaves the limits to v1, and says so', () => {
    const chosen = chooseHierarchy(v1, root([]))
    expect(chosen).toMatchObject({
      memory: v1.memory,
      pids: v1.pids,
      problem: null,
      unified: { path: '/cg/tend/home-1' },
      hierarchy: { version: 2, limits: 1 },
    })
    expect(chosen.hierarchy.why).toContain('lacks the memory and pids controllers: a hybrid host')
  })

  test('a subtree without the memory controller and no v1 memory: no limits, and the reason names the controller', () => {
    const chosen = chooseHierarchy({ memory: null, pids: null, problem: 'the cgroup v1 memory controller is not mounted' }, root(['pids']))
    expect(chosen.problem).toBe('the v2 subtree /cg/tend lacks the memory controller, and the cgroup v1 memory controller is not mounted')
    expect(chosen.hierarchy).toMatchObject({ version: 2, limits: null })
  })

  test('without a subtree, v1 is used and status says why', () => {
    expect(chooseHierarchy(v1, null).hierarchy).toMatchObject({ version: 1, limits: 1, why: expect.stringContaining('no cgroup v2 subtree was given') })
    expect(chooseHierarchy(v1, { problem: 'x is not on a cgroup2 file system' }).hierarchy.why).toBe(
      'the cgroup v2 subtree given is not usable: x is not on a cgroup2 file system',
    )
  })

  test('a full v2 subtree is found without looking at v1', () => {
    const { mount, subtree } = fakeTree('memory pids', { daemonFolder: 'home-2' })
    const roots = findTaskCgroupRoots({
      name: 'unused',
      uid: 0,
      daemon: 'home-2',
      cgroupBase: join(mount, 'no-v1-here'),
      unifiedSetting: subtree,
      unified: { isCgroup2: within(mount) },
    })
    expect(roots).toMatchObject({ memory: join(subtree, 'home-2'), hierarchy: { version: 2, limits: 2 } })
  })
})

describe('a task group on cgroup v2', () => {
  test('gets memory.max, memory.swap.max and pids.max', () => {
    const { mount, subtree } = fakeTree('memory pids', { daemonFolder: 'home-3' })
    const folder = join(subtree, 'home-3')
    writeFileSync(join(mount, 'unused'), '')
    const groups = TaskCgroups.create({ memory: folder, pids: folder, unified: { path: folder, controllers: ['memory', 'pids'] } }, 'task1', {
      memory: true,
      limits: { memoryBytes: 64 * 1024 * 1024, pidsMax: 32 },
    })
    const group = join(folder, 'task1')
    expect(groups.dirs.map((dir) => dir.path)).toEqual([group])
    expect(readFileSync(join(group, 'memory.max'), 'utf8')).toBe(String(64 * 1024 * 1024))
    expect(readFileSync(join(group, 'memory.swap.max'), 'utf8')).toBe('0')
    expect(readFileSync(join(group, 'pids.max'), 'utf8')).toBe('32')
  })

  test('beside v1 groups on a hybrid host holds no limit itself', () => {
    const { subtree } = fakeTree('', { daemonFolder: 'home-4' })
    const v1 = mkdtempSync(join(tmpdir(), 'tend-fake-cgroup1-'))
    made.push(v1)
    mkdirSync(join(v1, 'memory'))
    mkdirSync(join(v1, 'pids'))
    const folder = join(subtree, 'home-4')
    const groups = TaskCgroups.create({ memory: join(v1, 'memory'), pids: join(v1, 'pids'), unified: { path: folder, controllers: [] } }, 'task2', {
      memory: true,
      limits: { memoryBytes: 1024 * 1024, pidsMax: 7 },
    })
    expect(groups.dirs.map((dir) => dir.path)).toEqual([join(v1, 'memory', 'task2'), join(v1, 'pids', 'task2'), join(folder, 'task2')])
    expect(readFileSync(join(v1, 'pids', 'task2', 'pids.max'), 'utf8')).toBe('7')
    expect(() => readFileSync(join(folder, 'task2', 'pids.max'))).toThrow(/ENOENT/)
  })
})
