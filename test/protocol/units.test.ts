import { describe, expect, test } from 'vitest'
import { formatBytes, formatDuration, parseDuration, parseSize } from '../../protocol/index.js'

describe('durations and sizes', () => {
  test('durations take ms, s, m, h and d, and a bare number means seconds', () => {
    expect(parseDuration('500ms')).toBe(500)
    expect(parseDuration('30s')).toBe(30_000)
    expect(parseDuration('5m')).toBe(300_000)
    expect(parseDuration('2h')).toBe(7_200_000)
    expect(parseDuration('1d')).toBe(86_400_000)
    expect(parseDuration('1.5s')).toBe(1500)
    expect(parseDuration('7')).toBe(7000)
  })

  test('a malformed duration is refused with the value in the message', () => {
    expect(() => parseDuration('soon')).toThrow('invalid duration: expected a number with a unit (500ms, 30s, 5m, 2h), got "soon"')
    expect(() => parseDuration('-1s')).toThrow(RangeError)
    expect(() => parseDuration('5 weeks')).toThrow(RangeError)
  })

  test('sizes take binary k, M, G and T suffixes, with an optional B or iB', () => {
    expect(parseSize('512')).toBe(512)
    expect(parseSize('64k')).toBe(65_536)
    expect(parseSize('10M')).toBe(10 * 1024 ** 2)
    expect(parseSize('1G')).toBe(1024 ** 3)
    expect(parseSize('1GiB')).toBe(1024 ** 3)
    expect(parseSize('2MB')).toBe(2 * 1024 ** 2)
  })

  test('a malformed size is refused with the value in the message', () => {
    expect(() => parseSize('12q')).toThrow('invalid size: expected a number with an optional unit (64k, 10M, 1G), got "12q"')
  })

  test('bytes and durations format for people', () => {
    expect(formatBytes(10)).toBe('10B')
    expect(formatBytes(1536)).toBe('1.5K')
    expect(formatBytes(1024 ** 3)).toBe('1.0G')
    expect(formatDuration(250)).toBe('250ms')
    expect(formatDuration(1500)).toBe('1.5s')
    expect(formatDuration(90_000)).toBe('1m30s')
    expect(formatDuration(7_200_000)).toBe('2h')
    expect(formatDuration(3 * 86_400_000)).toBe('3d')
  })
})
