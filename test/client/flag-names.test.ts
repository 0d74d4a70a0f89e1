import { describe, expect, test } from 'vitest'
import { flagOfField, inFlagTerms } from '../../client/cli/flag-names.js'
import { TendError } from '../../protocol/index.js'

describe('request fields in the terms of the command line', () => {
  test('a field path names its flag: array indexes left out, the longest known path first', () => {
    expect(flagOfField('memoryBytes')).toBe('--memory')
    expect(flagOfField('writablePaths/2')).toBe('--writable')
    expect(flagOfField('tty/cols')).toBe('--cols')
    expect(flagOfField('ready/url')).toBe('--ready-http')
    expect(flagOfField('command')).toBeUndefined()
  })

  test('a problem about a field no flag sets keeps the request terms, and the message its "invalid request"', () => {
    const error = new TendError('TEND_ERR_VALIDATION', { detail: 'body/memoryBytes: expected an integer >= 1, got 0; body/command: expected array, got 1' })
    expect(inFlagTerms(error)).toEqual({
      message: 'invalid request: --memory: expected an integer >= 1, got 0; body/command: expected array, got 1',
      flags: ['--memory'],
    })
  })

  test("a daemon setting of the same name is not the flag's", () => {
    const error = new TendError('TEND_ERR_VALIDATION', { detail: 'body/writablePaths (daemon setting): /x cannot be used (EACCES)' })
    expect(inFlagTerms(error)).toEqual({ message: error.message, flags: [] })
  })

  test('another code that names a field: the field becomes its flag, the rest of the message stays', () => {
    const error = new TendError('TEND_ERR_SANDBOX_UNAVAILABLE', {
      profile: 'workspace',
      detail: 'body/memoryBytes needs a per-task cgroup, and there is none here',
    })
    const { message, flags } = inFlagTerms(error)
    expect(message).toContain('--memory needs a per-task cgroup')
    expect(message).not.toContain('body/')
    expect(flags).toEqual(['--memory'])
  })

  test('the task a command names is its ID argument, in the query (ref) or the path (params/id)', () => {
    const empty = new TendError('TEND_ERR_VALIDATION', { detail: 'querystring/ref: must NOT have fewer than 1 characters, got ""' })
    expect(inFlagTerms(empty)).toEqual({ message: 'ID: must NOT have fewer than 1 characters, got ""', flags: ['ID'] })
    const path = new TendError('TEND_ERR_VALIDATION', { detail: 'params/id: must match pattern "^[a-z0-9]+$", got "A!"' })
    expect(inFlagTerms(path).message).toBe('ID: must match pattern "^[a-z0-9]+$", got "A!"')
  })
})
