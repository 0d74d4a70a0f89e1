import { describe, expect, test } from 'vitest'
import { isNamedSignal, signalLabel, signalName, signalNumber } from '../../protocol/index.js'

describe('signals', () => {
  test('a name gives its number, and a name the system does not have gives none', () => {
    expect(signalNumber('SIGTERM')).toBe(15)
    expect(signalNumber('SIGKILL')).toBe(9)
    expect(signalNumber('SIGNOPE')).toBeUndefined()
    expect(signalNumber('toString')).toBeUndefined()
  })

  test('a number gives its first name; a real-time signal reads SIG<n>', () => {
    expect(signalName(15)).toBe('SIGTERM')
    expect(signalName(6)).toBe('SIGABRT')
    expect(signalName(34)).toBe('SIG34')
  })

  test('a label is the name when there is one, else the number as text', () => {
    expect(signalLabel('SIGINT')).toBe('SIGINT')
    expect(signalLabel(9)).toBe('SIGKILL')
    expect(signalLabel(34)).toBe('34')
  })

  test('only numbers with a name count as named signals', () => {
    expect(isNamedSignal(9)).toBe(true)
    expect(isNamedSignal(34)).toBe(false)
    expect(isNamedSignal(0)).toBe(false)
  })
})
