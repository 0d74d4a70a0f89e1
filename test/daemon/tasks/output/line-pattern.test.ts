import { describe, expect, test } from 'vitest'
import { compileLinePattern } from '../../../../daemon/tasks/output/line-pattern.js'
import { TendError } from '../../../../protocol/index.js'

describe('a line pattern an agent gives', () => {
  test('matches anywhere in a line, as a search', () => {
    const pattern = compileLinePattern('listening on (\\d+)', 'ready.pattern')
    expect(pattern.matches('Server listening on 8000 now')).toBe(true)
    expect(pattern.matches('starting up')).toBe(false)
  })

  test('a pattern RE2 cannot take is refused, naming the field and what is wrong', () => {
    for (const source of ['(unclosed', '(a)\\1', '(?<=a)b']) {
      let error: unknown
      try {
        compileLinePattern(source, 'ready.pattern')
      } catch (caught) {
        error = caught
      }
      expect(error, source).toBeInstanceOf(TendError)
      expect((error as TendError).code).toBe('TEND_ERR_VALIDATION')
      expect((error as TendError).message).toContain('ready.pattern: not a regular expression')
    }
  })

  test('a pattern that backtracks exponentially elsewhere is matched in linear time', () => {
    const pattern = compileLinePattern('(a+)+$', 'wait_for')
    const started = process.hrtime.bigint()
    expect(pattern.matches(`${'a'.repeat(50_000)}!`)).toBe(false)
    // A backtracking engine takes longer than the age of the universe on this line; RE2 takes milliseconds.
    expect(Number(process.hrtime.bigint() - started) / 1e6).toBeLessThan(5_000)
  })
})
