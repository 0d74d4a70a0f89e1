import { expect } from 'vitest'
import { randomBytes } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/*
 * This host's cgroup v2 hierarchy mounted on a temp folder for a test file (as root): a hybrid host
 * gives it no controllers, but every group has cgroup.kill, cgroup.events and cpu.stat. One folder
 * in it, named for the test, is where the test's daemons make their groups.
 */

export interface Cgroup2Mount {
  mount: string
  /** The test's folder in it (mode 0755). */
  subtree: string
}

export function mountCgroup2(name: string): Cgroup2Mount {
  const mount = mkdtempSync(join(tmpdir(), `tend-cgroup2-${name}-`))
  const mounted = spawnSync('mount', ['-t', 'cgroup2', 'none', mount], { encoding: 'utf8' })
  expect(mounted.status, `mount -t cgroup2 (needs root): ${mounted.stderr}`).toBe(0)
  chmodSync(mount, 0o755)
  const subtree = join(mount, `tend-test-${name}-${process.pid}-${randomBytes(3).toString('hex')}`)
  mkdirSync(subtree, { mode: 0o755 })
  return { mount, subtree }
}

/** Removes the test's groups (a failed test can have left some), unmounts, removes the mount point. */
export function unmountCgroup2({ mount, subtree }: Cgroup2Mount): void {
  removeGroups(subtree)
  spawnSync('umount', [mount])
  rmdirSync(mount)
}

/** Removes a cgroup folder and those in it, deepest first. */
export function removeGroups(folder: string): void {
  if (!folder || !existsSync(folder)) return
  for (const entry of readdirSync(folder, { withFileTypes: true })) if (entry.isDirectory()) removeGroups(join(folder, entry.name))
  rmdirSync(folder)
}
