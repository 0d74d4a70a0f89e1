import { describe, expect, test } from 'vitest'
import { pollUntil } from '../../protocol/index.js'

describe('pollUntil', () => {
  test('answers true at the first look where the condition holds, and looks no more', async () => {
    let looks = 0
    expect(await pollUntil(() => ++looks === 3, 10_000, 1)).toBe(true)
    expect(looks).toBe(3)
  })

  test('takes an asynchronous condition', async () => {
    let looks = 0
    expect(await pollUntil(async () => ++looks === 2, 10_000, 1)).toBe(true)
  })

  test('answers false once the time is up, after a last look at the deadline', async () => {
    const startedAt = Date.now()
    let lastLookAt = 0
    const held = await pollUntil(
      () => {
        lastLookAt = Date.now()
        return false
      },
      50,
      20,
    )
    expect(held).toBe(false)
    expect(lastLookAt - startedAt).toBeGreaterThanOrEqual(50)
  })

  test('looks once even with no time to wait', async () => {
    let looks = 0
    expect(await pollUntil(() => (looks++, false), 0, 20)).toBe(false)
    expect(looks).toBe(1)
  })
})
