import { afterEach, expect, test } from 'vitest'
import { mkdirSync, mkdtempSync, realpathSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadDaemonConfig } from '../../daemon/config.js'
import { cachedProtectedView } from '../../daemon/sandbox/protected-places.js'
import { waitFor } from '../helpers/wait-for.js'

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

/**
 * Once the folder last changed over a second ago, the cache trusts it. Told by its ctime, which no
 * one can set (an mtime set in the past or the future proves nothing): so this waits.
 */
async function settle(...paths: string[]): Promise<void> {
  await waitFor(
    `${paths.join(', ')} unchanged for over a second`,
    () => paths.every((path) => Date.now() - (statSync(path, { throwIfNoEntry: false })?.ctimeMs ?? 0) > 1100),
    5000,
  )
}

test('the cached protected view answers from memory while nothing it was made from changed', async () => {
  const { home, tendHome, view } = setUp()
  // The folders of the system's secret paths too (useradd elsewhere changes /etc).
  await settle(home, tendHome, '/etc', '/etc/ssh')
  const first = view()
  expect(view()).toBe(first)
})

test('a secret path made since the last look is protected at the next one, without waiting', async () => {
  const { home, tendHome, view } = setUp()
  await settle(home, tendHome)
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
