import { describe, expect, test } from 'vitest'
import { READY_TIMEOUT_MS } from '../../../../protocol/index.js'
import { normalizeReadyCondition } from '../../../../daemon/tasks/ready/ready-condition.js'

describe('normalizeReadyCondition', () => {
  test('keeps the one condition given and fills in its timeout', () => {
    expect(normalizeReadyCondition(undefined)).toBeUndefined()
    expect(normalizeReadyCondition({ pattern: 'listening' })).toEqual({ pattern: 'listening', timeoutMs: READY_TIMEOUT_MS })
    expect(normalizeReadyCondition({ port: 3000, timeoutMs: 5000 })).toEqual({ port: 3000, timeoutMs: 5000 })
    expect(normalizeReadyCondition({ url: 'http://localhost:3000/health' })).toEqual({ url: 'http://localhost:3000/health', timeoutMs: READY_TIMEOUT_MS })
  })

  test('refuses none or several conditions, naming them', () => {
    expect(() => normalizeReadyCondition({})).toThrow(/ready: exactly one of pattern, port and url is needed, got none/)
    expect(() => normalizeReadyCondition({ port: 1, url: 'http://x/' })).toThrow(/got port and url/)
  })

  test('refuses a pattern RE2 cannot take and a URL that is not http(s)', () => {
    expect(() => normalizeReadyCondition({ pattern: '(?=x)' })).toThrow(/ready\.pattern: not a regular expression tend can match/)
    expect(() => normalizeReadyCondition({ url: 'http://' })).toThrow(/ready\.url: not a URL/)
  })
})
