import { describe, expect, test } from 'vitest'
import { stripVTControlCharacters } from 'node:util'
import { MAX_HELD_BACK_BYTES, plainText, plainTextChunk } from '../../protocol/index.js'

/*
 * What a terminal task's output.log holds, byte for byte as real programs write it, and the plain
 * text a reader gets from it.
 */

describe('plainText: control sequences', () => {
  test('colours and styles (SGR, 16, 256 and true colour) leave only the text', () => {
    const raw = '\x1b[1mbold\x1b[0m \x1b[31mred\x1b[39m \x1b[38;5;196mindexed\x1b[m \x1b[38;2;255;100;0mrgb\x1b[0m\r\n'
    expect(plainText(raw)).toBe('bold red indexed rgb\n')
  })

  test('cursor moves, erases, private modes and the alternate screen are removed', () => {
    const raw = '\x1b[?1049h\x1b[H\x1b[2J\x1b[?25ltop - 10:00:00\x1b[K\r\n\x1b[2;1HTasks: 3\x1b[K\x1b[?25h\x1b[?1049l\x1b[?2004h'
    expect(plainText(raw)).toBe('top - 10:00:00\nTasks: 3')
  })

  test('a window title (OSC ended by BEL), with the spaces and @ that bash puts in it, is removed', () => {
    expect(plainText('\x1b]0;title\x07after')).toBe('after')
    expect(plainText('\x1b]0;root@box: /tmp/work dir\x07root@box:/tmp$ ')).toBe('root@box:/tmp$ ')
    // Node's own stripper (ansi-regex's pattern) leaves most of such a title as text.
    expect(stripVTControlCharacters('\x1b]0;my title\x07x')).not.toBe('x')
  })

  test('a hyperlink (OSC 8 ended by ST) keeps its text', () => {
    expect(plainText('see \x1b]8;;https://example.com/a b\x1b\\the docs\x1b]8;;\x1b\\.\n')).toBe('see the docs.\n')
  })

  test('DCS and APC strings, charset designations and the short escapes are removed', () => {
    expect(plainText('a\x1bPq#0;2;0;0;0#0~~\x1b\\b')).toBe('ab')
    expect(plainText('a\x1b_Gf=100;AAAA\x1b\\b')).toBe('ab')
    expect(plainText('\x1b(B\x1b)0\x1b#8\x1b7saved\x1b8\x1b=\x1b>\x1bM\x1bc')).toBe('saved')
  })

  test('CSI with a secondary marker (\\x1b[>4;1m) and with intermediates (\\x1b[0 q) are removed whole', () => {
    expect(plainText('\x1b[>4;1mx\x1b[0 qy\x1b[>0c')).toBe('xy')
  })

  test('BEL, DEL, form feed, other C0 and C1 controls are dropped; \\n and \\t stay; non-ASCII text stays', () => {
    expect(plainText('a\x07b\x7fc\x0cd\x00e\u009bf\tg\nh é 日本 🙂')).toBe('abcdef\tg\nh é 日本 🙂')
  })

  test('a string sequence (OSC, DCS, SOS, PM, APC) never runs past the end of its line: the lines after it are read', () => {
    expect(plainText('H:\x1bX\nERROR big failure\n')).toBe('H:\nERROR big failure\n')
    expect(plainText(`C:\x1b]0;title${'x'.repeat(5000)}\nERROR: real error line\n`)).toBe('C:\nERROR: real error line\n')
    expect(plainText('a\x1bPq#0\nb\x1b^pm\nc\x1b_apc\nd')).toBe('a\nb\nc\nd')
    expect(plainTextChunk('a\x1b]0;title\nnext', { final: false })).toEqual({ text: 'a\nnext', heldBackBytes: 0 })
  })

  test('a sequence broken off by a control character ends before it, and the character counts', () => {
    expect(plainText('\x1b[31\nnext')).toBe('\nnext')
    expect(plainText('\x1b]0;title\x1b[1mbold')).toBe('bold')
  })
})

describe('plainText: lines as a terminal shows them', () => {
  test('\\r\\n and \\r\\r\\n end a line', () => {
    expect(plainText('one\r\ntwo\r\r\nthree\n')).toBe('one\ntwo\nthree\n')
  })

  test('a progress bar redrawn with \\r keeps only its last state', () => {
    const raw = 'downloading\r\n  0% [          ]\r 50% [=====     ]\r\x1b[K100% [==========]\r\ndone\r\n'
    expect(plainText(raw)).toBe('downloading\n100% [==========]\ndone\n')
  })

  test('a \\r at the very end, or before an escape and \\n, keeps the line', () => {
    expect(plainText('prompt> \r')).toBe('prompt> ')
    expect(plainText('line\r\x1b[K\nnext')).toBe('line\nnext')
  })

  test("backspace erases the character before it, and the terminal's echo of an erase (\\b \\b) too", () => {
    expect(plainText('>>> pritn\b \b\b \bnt(1)\r\n')).toBe('>>> print(1)\n')
    expect(plainText('ab\b \b\r\n')).toBe('a\n')
    expect(plainText('\bx\r\b\by')).toBe('y')
    expect(plainText('🙂\b!')).toBe('!')
  })

  test('a line drawn over after a lone \\r keeps what was not drawn over, as a terminal shows it: nothing of it is lost', () => {
    expect(plainText('FAILED 3 tests\rok\n')).toBe('okILED 3 tests\n')
    expect(plainText('12345\rab\rc\n')).toBe('cb345\n')
    expect(plainText('done 🙂 é\r🙃\n')).toBe('🙃one 🙂 é\n')
  })

  test('a long line drawn over at its start again and again reads as it was left (each redraw costs what it draws, not the line)', () => {
    const raw = `${'a'.repeat(128 * 1024)}${'\rb'.repeat(64 * 1024)}\n`
    expect(plainText(raw)).toBe(`b${'a'.repeat(128 * 1024 - 1)}\n`)
  })

  test('backspaces move back over a line as a terminal does: what is drawn then goes over it, nothing else of it is lost', () => {
    expect(plainText(`FAIL: 3 tests failed${'\b'.repeat(20)}PASS\n`)).toBe('PASS: 3 tests failed\n')
    expect(plainText('abc\b\n')).toBe('abc\n')
  })

  test('a drawn-over line of many spaces before its last character reads whole (its trailing spaces trimmed in one pass)', () => {
    const spaces = ' '.repeat(200_000)
    expect(plainText(`x\ry${spaces}z\n`)).toBe(`y${spaces}z\n`)
    // Spaces draw over `bc` as a terminal's do; the line's end of spaces then shows as nothing.
    expect(plainText(`abc\rX${spaces}\n`)).toBe('X\n')
  })

  test('a line erased after its \\r (\\x1b[K, \\x1b[2K) is replaced by what is drawn next', () => {
    expect(plainText('downloading 100%\r\x1b[Kdone\n')).toBe('done\n')
    expect(plainText('downloading 100%\r\x1b[2Kdone\n')).toBe('done\n')
  })

  test('an echoed Python session reads as its transcript', () => {
    const raw = '>>> x = 6 * 7\r\n>>> print(x)\r\n42\r\n>>> '
    expect(plainText(raw)).toBe('>>> x = 6 * 7\n>>> print(x)\n42\n>>> ')
  })
})

describe('plainTextChunk: reading a terminal while it writes', () => {
  const split = (raw: string) => plainTextChunk(raw, { final: false })

  test('output that ends in the middle of an escape sequence holds the sequence back', () => {
    expect(split('ready\x1b')).toEqual({ text: 'ready', heldBackBytes: 1 })
    expect(split('ready\x1b[3')).toEqual({ text: 'ready', heldBackBytes: 3 })
    expect(split('ready\x1b[38;5')).toEqual({ text: 'ready', heldBackBytes: 6 })
    expect(split('a\x1b]0;a title with é')).toEqual({ text: 'a', heldBackBytes: Buffer.byteLength('\x1b]0;a title with é') })
    expect(split('a\x1b]0;t\x1b')).toEqual({ text: 'a', heldBackBytes: 6 })
    expect(split('a\x1b(')).toEqual({ text: 'a', heldBackBytes: 2 })
  })

  test('with final the unfinished sequence is dropped, not held', () => {
    expect(plainTextChunk('ready\x1b[3', { final: true })).toEqual({ text: 'ready', heldBackBytes: 0 })
    expect(plainTextChunk('a\x1b]0;never ended', { final: true })).toEqual({ text: 'a', heldBackBytes: 0 })
  })

  test('reading a stream in every two-part split gives the same text as reading it whole', () => {
    const raw = Buffer.from('\x1b]0;me@box: ~\x07\x1b[1;32mme@box\x1b[0m:~$ ls\r\nfile é.txt\r\r\n\x1b[?2004l日本\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\r\n')
    const whole = plainText(raw)
    for (let cut = 0; cut <= raw.length; cut++) {
      const first = plainTextChunk(raw.subarray(0, cut), { final: false })
      const next = cut - first.heldBackBytes
      const second = plainTextChunk(raw.subarray(next), { final: true })
      expect(first.text + second.text, `split at byte ${cut}`).toBe(whole)
    }
  })

  test('a line redrawn across two reads: each read shows the line as it stood then', () => {
    expect(split(' 10%')).toEqual({ text: ' 10%', heldBackBytes: 0 })
    expect(split('\r 60%\r100%\r\n')).toEqual({ text: '100%\n', heldBackBytes: 0 })
  })

  test('bytes that end inside a UTF-8 character hold the character back', () => {
    const bytes = Buffer.from('ok é')
    expect(plainTextChunk(bytes.subarray(0, bytes.length - 1), { final: false })).toEqual({ text: 'ok ', heldBackBytes: 1 })
    const emoji = Buffer.from('🙂')
    expect(plainTextChunk(emoji.subarray(0, 3), { final: false })).toEqual({ text: '', heldBackBytes: 3 })
    expect(plainTextChunk(Buffer.from('plain'), { final: false })).toEqual({ text: 'plain', heldBackBytes: 0 })
  })

  test(`an unfinished sequence longer than ${MAX_HELD_BACK_BYTES} bytes is not held back: a reader never stalls behind it`, () => {
    const endless = `x\x1b]0;${'t'.repeat(MAX_HELD_BACK_BYTES)}`
    expect(split(endless)).toEqual({ text: 'x', heldBackBytes: 0 })
  })
})
