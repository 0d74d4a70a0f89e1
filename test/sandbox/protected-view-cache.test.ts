import { afterEach, expect, test } from 'vitest'
import { mkdirSync, mkdtempSync, realpathSync, rmSync, utimesSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadDaemonConfig } from '../../daemon/config.js'
import { cachedProtectedView } from '../../daemon/sandbox/protected-places.js'

const made: string[] = []
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function setUp() {
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'tend-view-cache-')))
  made.push(base)
  const home = join(base, 'user')
  mkdirSync(home, { mode: 0o755 })
  mkdirSync(join(base, 'tend-home'), { mode: 0o700 })
  const config = loadDaemonConfig({ TEND_HOME: join(base, 'tend-home'), HOME: home, PATH: process.env.PATH })
  const view = cachedProtectedView(config, { homes: () => [], registries: () => [] })
  // The tend home holds the console's tokens (a credential file): a folder the cache watches too.
  return { home, tendHome: join(base, 'tend-home'), view }
}

/** As if the folder last changed a minute ago: the cache then trusts it. */
function settle(path: string): void {
  const past = new Date(Date.now() - 60_000)
  utimesSync(path, past, past)
}

test('the cached protected view answers from memory while nothing it was made from changed', () => {
  const { home, tendHome, view } = setUp()
  settle(home)
  settle(tendHome)
  const first = view()
  expect(view()).toBe(first)
})

test('a secret path made since the last look is protected at the next one, without waiting', () => {
  const { home, tendHome, view } = setUp()
  settle(home)
  settle(tendHome)
  expect(view().places.map((place) => place.path)).not.toContain(join(home, '.aws'))
  mkdirSync(join(home, '.aws'))
  const after = view()
  expect(after.places.map((place) => place.path)).toContain(join(home, '.aws'))
  expect(after.masks).toContain(join(home, '.aws'))
})

test('a secret path in a folder that changed within the last second is looked at on every call', () => {
  const { home, view } = setUp()
  mkdirSync(join(home, '.config'))
  const first = view()
  expect(view()).not.toBe(first)
  mkdirSync(join(home, '.config', 'gh'))
  expect(view().masks).toContain(join(home, '.config', 'gh'))
})
