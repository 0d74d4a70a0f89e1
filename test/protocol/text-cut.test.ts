import { describe, expect, test } from 'vitest'
import { cutText } from '../../protocol/index.js'

describe('cutText', () => {
  test('text within the limit is kept whole, without a mark', () => {
    expect(cutText('ready', 5, '…')).toBe('ready')
  })

  test('a cut keeps max units with the mark counted in', () => {
    expect(cutText('abcdefgh', 5, '…')).toBe('abcd…')
    expect(cutText('abcdefgh', 5)).toBe('abcde')
  })

  test('a cut that would fall inside an emoji leaves the whole emoji out, never half of it', () => {
    const text = `${'a'.repeat(498)}😀 evil`
    const cut = cutText(text, 500, '…')
    expect(cut).toBe(`${'a'.repeat(498)}…`)
    expect(Buffer.from(cut, 'utf8').toString('utf8')).toBe(cut)
    expect(cutText(`${'a'.repeat(499)}😀`, 500)).toBe('a'.repeat(499))
    expect(cutText(`${'a'.repeat(498)}😀x`, 500)).toBe(`${'a'.repeat(498)}😀`)
  })
})
