import { describe, expect, test } from 'vitest'
import { visibleLine, visibleText } from '../../protocol/index.js'

describe('text made safe for a terminal', () => {
  test('control characters, the direction marks and overrides, and the invisible spaces are shown as \\uXXXX; newlines and tabs stay', () => {
    expect(visibleText('a\u001b[31mb\u0007c\u009bd\u202ee\u200bf\u2060g\ufeffh\n\ti')).toBe(
      'a\\u001b[31mb\\u0007c\\u009bd\\u202ee\\u200bf\\u2060g\\ufeffh\n\ti',
    )
  })

  test('on one line a newline and a tab are escaped too', () => {
    expect(visibleLine('web\nfake\trow')).toBe('web\\u000afake\\u0009row')
  })

  test('what people write stays as it is: accents, other scripts, emoji joined by ZWJ', () => {
    const text = 'café 日本 тест 👨\u200d👩\u200d👧 e\u0301'
    expect(visibleText(text)).toBe(text)
  })
})
