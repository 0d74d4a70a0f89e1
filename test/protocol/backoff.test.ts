import { describe, expect, test } from 'vitest'
import { backoffMs } from '../../protocol/index.js'

describe('backoffMs', () => {
  test('starts at the first pause and doubles at each retry', () => {
    expect([0, 1, 2, 3].map((retry) => backoffMs(retry, 50, 10_000))).toEqual([50, 100, 200, 400])
  })

  test('never goes past the largest pause, however many retries', () => {
    expect(backoffMs(5, 50, 1000)).toBe(1000)
    expect(backoffMs(10_000, 50, 1000)).toBe(1000)
  })

  test('a retry number below zero is the first pause', () => {
    expect(backoffMs(-1, 50, 1000)).toBe(50)
  })
})
