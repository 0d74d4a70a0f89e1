import { expect, test } from 'vitest'
import { spawnSync } from 'node:child_process'
import { IdleMemoryRelease, loadMemoryRelease } from '../../../daemon/memory/idle-release.js'
import { ADDON_PATH } from '../../../daemon/native/load-addon.js'
import { waitFor } from '../../helpers/wait-for.js'

test("the memory-release addon is built and loads (the build needs a C compiler and Node's headers)", () => {
  const loaded = loadMemoryRelease()
  expect('reason' in loaded ? loaded.reason : undefined).toBeUndefined()
})

test('releasing gives the pages malloc keeps free back to the kernel', () => {
  // A fresh process fragments malloc's heap: 2,000 buffers of 64 KiB (below the mmap threshold, so
  // malloc'd), every tenth kept, the rest freed. free() cannot return holes below live blocks (with
  // the release left out, RSS stayed at its peak for 3 s). The buffers are freed by V8 after a
  // collection, on its own time: the child collects and releases until RSS falls, for up to 10 s.
  const script = `
    const { releaseFreeMemory } = require(${JSON.stringify(ADDON_PATH)}).memoryRelease
    const rss = () => Number(require('fs').readFileSync('/proc/self/statm', 'utf8').split(' ')[1]) * 4096
    let buffers = Array.from({ length: 2000 }, () => Buffer.allocUnsafeSlow(64 * 1024).fill(1))
    const kept = buffers.filter((_, i) => i % 10 === 0)
    buffers = null
    const peak = rss()
    const deadline = Date.now() + 10000
    const tick = () => {
      globalThis.gc()
      const released = releaseFreeMemory()
      const now = rss()
      if (peak - now > 64 * 1024 * 1024 || Date.now() > deadline) console.log(JSON.stringify({ peak, now, released, kept: kept.length }))
      else setTimeout(tick, 20)
    }
    tick()
  `
  const child = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8', timeout: 30_000 })
  expect(child.status, child.stderr).toBe(0)
  const { peak, now } = JSON.parse(child.stdout) as { peak: number; now: number }
  // ~112 MiB were freed in holes; at least 64 MiB of them must have left the process.
  expect(peak - now, `RSS ${peak} at the peak, ${now} after releasing`).toBeGreaterThan(64 * 1024 * 1024)
})

test('memory is released once the daemon is quiet, never while activity keeps coming', async () => {
  let releases = 0
  const memory = new IdleMemoryRelease(() => (releases += 1) > 0, 100)
  try {
    const busyUntil = Date.now() + 600
    memory.activity()
    // Activity every 20 ms for 600 ms: quiet never lasts 100 ms, so nothing is released.
    await waitFor('600 ms of steady activity', () => {
      memory.activity()
      return Date.now() >= busyUntil
    })
    expect(releases).toBe(0)
    await waitFor('one release after the activity stopped', () => releases === 1, 5_000)
    memory.activity()
    await waitFor('another release after the next burst', () => releases === 2, 5_000)
    expect(releases).toBe(2)
  } finally {
    memory.close()
  }
})
