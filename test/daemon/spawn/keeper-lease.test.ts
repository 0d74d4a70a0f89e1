import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'
import { LEASE_FILE, monotonicNowMs, watchFence, writeLease, type FenceAnswer } from '../../../daemon/spawn/keeper-lease.js'
import { waitFor } from '../../helpers/wait-for.js'

const folder = mkdtempSync(join(tmpdir(), 'tend-keeper-lease-'))
afterAll(() => rmSync(folder, { recursive: true, force: true }))

/** A fence whose grantor answers what `answer` says at the moment it is asked. */
function fenceAnswering(answer: () => Promise<FenceAnswer>, ttlMs = 500) {
  const seen = { lost: [] as string[], confirmed: [] as number[] }
  const stop = watchFence({
    ttlMs,
    confirm: answer,
    unconfirmedWhy: (silentMs) => `silent for ${silentMs} ms`,
    onLost: (why) => seen.lost.push(why),
    onConfirmed: (until) => seen.confirmed.push(until),
  })
  return { seen, stop }
}

describe('a keeper lease', () => {
  test('is written as a CLOCK_MONOTONIC deadline, ms from now', async () => {
    const before = monotonicNowMs()
    await writeLease(folder, 5000)
    const until = Number(readFileSync(join(folder, LEASE_FILE), 'utf8'))
    expect(until).toBeGreaterThanOrEqual(before + 5000)
    expect(until).toBeLessThanOrEqual(monotonicNowMs() + 5000)
  })
})

describe('a fence', () => {
  test('each confirmation is handed on, with a deadline short of the expiry the grantor gave', async () => {
    const { seen, stop } = fenceAnswering(async () => ({ held: true, remainingMs: 500 }))
    try {
      await waitFor('two confirmations', () => seen.confirmed.length >= 2)
      for (const until of seen.confirmed) expect(until).toBeLessThan(Date.now() + 500)
      expect(seen.lost).toEqual([])
    } finally {
      stop()
    }
  })

  test('one the grantor says is not held is lost at once, once, with its why', async () => {
    const { seen, stop } = fenceAnswering(async () => ({ held: false, why: 'another holds it' }))
    try {
      await waitFor('the fence to be lost', () => seen.lost.length > 0)
      expect(seen.lost).toEqual(['another holds it'])
    } finally {
      stop()
    }
  })

  test('one nobody confirms is lost before it would expire, saying for how long it went unconfirmed', async () => {
    const { seen, stop } = fenceAnswering(() => new Promise<FenceAnswer>(() => undefined), 300)
    try {
      await waitFor('the unconfirmed fence to be lost', () => seen.lost.length > 0)
      expect(seen.lost).toHaveLength(1)
      expect(seen.lost[0]).toMatch(/^silent for \d+ ms$/)
      expect(seen.confirmed).toEqual([])
    } finally {
      stop()
    }
  })
})
