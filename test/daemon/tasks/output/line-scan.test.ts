import { describe, expect, test } from 'vitest'
import { compileLinePattern, PATTERN_LINE_MAX } from '../../../../daemon/tasks/output/line-pattern.js'
import { createLineScan } from '../../../../daemon/tasks/output/line-scan.js'

const scanFor = (pattern: string, from = 0) => createLineScan(compileLinePattern(pattern, 'waitFor'), from)

describe('a line scan of output for a pattern', () => {
  test('finds the first complete line that matches, with the offset just past it', () => {
    const scan = scanFor('listening on \\d+', 100)
    expect(scan.feed(Buffer.from('starting\nlistening'))).toBeNull()
    expect(scan.feed(Buffer.from(' on 8000\nmore\n'))).toEqual({ line: 'listening on 8000', end: 100 + 'starting\nlistening on 8000\n'.length })
  })

  test('a matching line is not reported before its newline, unless the output has ended there', () => {
    const scan = scanFor('ready')
    expect(scan.feed(Buffer.from('booting\nready'))).toBeNull()
    expect(scan.position).toBe('booting\nready'.length)
    expect(scan.finish()).toEqual({ line: 'ready', end: 'booting\nready'.length })
  })

  test('a line split over many feeds, a character cut in two included, is matched whole', () => {
    const scan = scanFor('héllo wörld')
    const bytes = Buffer.from('héllo wörld\n')
    for (let index = 0; index < bytes.length - 1; index += 1) expect(scan.feed(bytes.subarray(index, index + 1))).toBeNull()
    expect(scan.feed(bytes.subarray(bytes.length - 1))).toEqual({ line: 'héllo wörld', end: bytes.length })
  })

  test("a terminal's line is matched as plain text: control sequences and the carriage return removed", () => {
    const scan = scanFor('^Server up$')
    expect(scan.feed(Buffer.from('\x1b[32mServer up\x1b[0m\r\n'))).toEqual({ line: 'Server up', end: 'x[32mServer upx[0m\r\n'.length })
  })

  test("a pipe's coloured line is matched as plain text too: what an agent reads is what its pattern meets", () => {
    const scan = scanFor('^ERROR boom$')
    const bytes = Buffer.from('\x1b[1;31mERROR boom\x1b[0m\n')
    expect(scan.feed(bytes)).toEqual({ line: 'ERROR boom', end: bytes.length })
  })

  test('a line longer than the pattern limit is matched on its head, and what is held of it stays bounded', () => {
    const scan = scanFor('^a+$')
    const long = Buffer.alloc(PATTERN_LINE_MAX * 8, 'a')
    for (let index = 0; index < 16; index += 1) expect(scan.feed(long)).toBeNull()
    expect(scan.heldBytes).toBeLessThanOrEqual(PATTERN_LINE_MAX * 4)
    const match = scan.feed(Buffer.from('b\n'))
    expect(match?.end).toBe(long.length * 16 + 2)
    expect(match?.line.length).toBe(PATTERN_LINE_MAX)
  })

  test('no line matches: nothing is reported, at the end either', () => {
    const scan = scanFor('never')
    expect(scan.feed(Buffer.from('one\ntwo\nthree'))).toBeNull()
    expect(scan.finish()).toBeNull()
  })
})
