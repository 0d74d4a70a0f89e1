import { afterEach, expect, test } from 'vitest'
import { execFileSync } from 'node:child_process'
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { TEND_BIN } from '../helpers/test-daemon.js'

// This suite runs on Node 20, which lacks module.enableCompileCache: bin/compile-cache.js keeps the
// CLI's cache itself (integration/dsh tests Node 22's own).
const folders: string[] = []
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
})

function scratch(): { tmp: string; cacheHome: string; cacheDir: string } {
  const root = mkdtempSync(join(tmpdir(), 'tend-compile-cache-'))
  folders.push(root)
  const tmp = join(root, 'tmp')
  mkdirSync(tmp)
  return { tmp, cacheHome: join(root, 'cache'), cacheDir: join(root, 'cache', 'tend', 'compile-cache') }
}

function tendVersion(tmp: string, cacheHome: string): string {
  return execFileSync(process.execPath, [TEND_BIN, '-V'], { env: { ...process.env, TMPDIR: tmp, XDG_CACHE_HOME: cacheHome }, encoding: 'utf8', timeout: 30_000 }).trim()
}

/** name -> [mtime, bytes] of every file in `folder`. */
function snapshot(folder: string): Record<string, [number, string]> {
  return Object.fromEntries(readdirSync(folder).map((name) => [name, [statSync(join(folder, name)).mtimeMs, readFileSync(join(folder, name)).toString('base64')]]))
}

test("the first command writes V8's code cache of the CLI's bundle into a private folder; the next one uses it as it is", () => {
  const { tmp, cacheHome, cacheDir } = scratch()
  expect(tendVersion(tmp, cacheHome)).toMatch(/^\d+\.\d+\.\d+/)
  const first = snapshot(cacheDir)
  expect(Object.keys(first)).toEqual([expect.stringMatching(/^cli-v\d+\.\d+\.\d+-\w+-\d+-\d+-\d+\.v8cache$/)])
  expect(statSync(cacheDir).mode & 0o777).toBe(0o700)
  expect(statSync(join(cacheDir, Object.keys(first)[0]!)).mode & 0o777).toBe(0o600)
  // Accepted by V8: not written again (a refused cache would be replaced).
  expect(tendVersion(tmp, cacheHome)).toMatch(/^\d+\.\d+\.\d+/)
  expect(snapshot(cacheDir)).toEqual(first)
  expect(readdirSync(tmp)).toEqual([])
})

test('a damaged cache is refused by V8 and written anew; the command runs all the same', () => {
  const { tmp, cacheHome, cacheDir } = scratch()
  tendVersion(tmp, cacheHome)
  const [name] = readdirSync(cacheDir)
  writeFileSync(join(cacheDir, name!), Buffer.alloc(4096, 7))
  expect(tendVersion(tmp, cacheHome)).toMatch(/^\d+\.\d+\.\d+/)
  expect(readFileSync(join(cacheDir, name!)).equals(Buffer.alloc(4096, 7))).toBe(false)
  const rewritten = snapshot(cacheDir)
  tendVersion(tmp, cacheHome)
  expect(snapshot(cacheDir)).toEqual(rewritten)
})

test('a cache of an earlier build of the bundle is removed when the new one is written', () => {
  const { tmp, cacheHome, cacheDir } = scratch()
  mkdirSync(cacheDir, { recursive: true, mode: 0o700 })
  writeFileSync(join(cacheDir, 'cli-v0.0.0-x64-1-2-3.v8cache'), 'old', { mode: 0o600 })
  writeFileSync(join(cacheDir, 'mcp-v0.0.0-x64-1-2-3.v8cache'), 'another bundle', { mode: 0o600 })
  tendVersion(tmp, cacheHome)
  const names = readdirSync(cacheDir).sort()
  expect(names).toHaveLength(2)
  expect(names[0]).toMatch(/^cli-v\d+/)
  expect(names[0]).not.toBe('cli-v0.0.0-x64-1-2-3.v8cache')
  expect(names[1]).toBe('mcp-v0.0.0-x64-1-2-3.v8cache')
})

test('a cache folder another user owns, or the group may write, is never used', () => {
  const planted = scratch()
  mkdirSync(planted.cacheDir, { recursive: true })
  chownSync(join(planted.cacheHome, 'tend'), 65534, 65534)
  chownSync(planted.cacheDir, 65534, 65534)
  chmodSync(planted.cacheDir, 0o777)
  expect(tendVersion(planted.tmp, planted.cacheHome)).toMatch(/^\d+\.\d+\.\d+/)
  expect(readdirSync(planted.cacheDir)).toEqual([])

  const loose = scratch()
  mkdirSync(loose.cacheDir, { recursive: true, mode: 0o700 })
  chmodSync(loose.cacheDir, 0o770)
  expect(tendVersion(loose.tmp, loose.cacheHome)).toMatch(/^\d+\.\d+\.\d+/)
  expect(readdirSync(loose.cacheDir)).toEqual([])
  expect(readdirSync(loose.tmp)).toEqual([])
})
