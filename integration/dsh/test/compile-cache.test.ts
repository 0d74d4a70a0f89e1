import { execFileSync } from 'node:child_process'
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { INTEGRATION_DIR } from './support/harness.js'

// Node 22 (this suite's runtime) has module.enableCompileCache; Node 20 does not.
const TEND_BIN = join(INTEGRATION_DIR, '..', '..', 'bin', 'tend.js')
const folders: string[] = []
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
})

/** Runs `tend -V` under this Node with the given temporary and cache folders; answers its output. */
function tendVersion(tmp: string, cacheHome: string): string {
  return execFileSync(process.execPath, [TEND_BIN, '-V'], { env: { ...process.env, TMPDIR: tmp, XDG_CACHE_HOME: cacheHome }, encoding: 'utf8', timeout: 30_000 }).trim()
}

/** Every file under `folder`, relative to it. */
const filesUnder = (folder: string) => readdirSync(folder, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile()).map((entry) => entry.name)

function scratch(): { tmp: string; cacheHome: string } {
  const root = mkdtempSync(join(tmpdir(), 'tend-compile-cache-'))
  folders.push(root)
  const tmp = join(root, 'tmp')
  const cacheHome = join(root, 'cache')
  mkdirSync(tmp, { mode: 0o1777 })
  chmodSync(tmp, 0o1777)
  mkdirSync(cacheHome)
  return { tmp, cacheHome }
}

test("the CLI keeps Node's compile cache in the user's own cache folder, never in the shared temporary folder", () => {
  expect(typeof (process as { getuid?: () => number }).getuid).toBe('function')
  const { tmp, cacheHome } = scratch()
  expect(tendVersion(tmp, cacheHome)).toMatch(/^\d+\.\d+\.\d+/)
  expect(filesUnder(join(cacheHome, 'tend', 'compile-cache')).length).toBeGreaterThan(0)
  expect(readdirSync(tmp)).toEqual([])
})

test('a cache folder another user owns, or may write, is not used: the CLI runs without a cache', () => {
  const { tmp, cacheHome } = scratch()
  // Made first by someone else (uid 65534, nobody), writable by all: what an attacker would plant.
  const planted = join(cacheHome, 'tend', 'compile-cache')
  mkdirSync(planted, { recursive: true })
  chownSync(join(cacheHome, 'tend'), 65534, 65534)
  chownSync(planted, 65534, 65534)
  chmodSync(planted, 0o777)
  expect(tendVersion(tmp, cacheHome)).toMatch(/^\d+\.\d+\.\d+/)
  expect(filesUnder(planted)).toEqual([])
  expect(readdirSync(tmp)).toEqual([])

  // Our own folder, but writable by the group: refused too.
  const loose = scratch()
  mkdirSync(join(loose.cacheHome, 'tend', 'compile-cache'), { recursive: true, mode: 0o700 })
  chmodSync(join(loose.cacheHome, 'tend', 'compile-cache'), 0o770)
  expect(tendVersion(loose.tmp, loose.cacheHome)).toMatch(/^\d+\.\d+\.\d+/)
  expect(filesUnder(join(loose.cacheHome, 'tend', 'compile-cache'))).toEqual([])
})
