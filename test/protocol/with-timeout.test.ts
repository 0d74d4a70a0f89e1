import { describe, expect, test } from 'vitest'
import { withTimeout } from '../../protocol/index.js'

describe('withTimeout', () => {
  test('answers what the promise answers when it settles in time', async () => {
    await expect(withTimeout(Promise.resolve(7), 10_000, () => new Error('late'))).resolves.toBe(7)
    await expect(withTimeout(Promise.reject(new Error('refused')), 10_000, () => new Error('late'))).rejects.toThrow('refused')
  })

  test('rejects with the error it is given when the promise does not settle in time', async () => {
    await expect(withTimeout(new Promise(() => undefined), 10, () => new Error('no answer within 10 ms'))).rejects.toThrow('no answer within 10 ms')
  })
})
