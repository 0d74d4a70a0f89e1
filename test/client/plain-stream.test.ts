import { describe, expect, test } from 'vitest'
import { PlainTextStream } from '../../client/cli/plain-stream.js'

/** `tend logs --plain` reads a terminal's output in whatever chunks the daemon answers. */
describe('PlainTextStream', () => {
  const feed = (chunks: string[], options: { final: boolean } = { final: true }) => {
    const stream = new PlainTextStream()
    const printed = chunks.map((chunk, index) => stream.push(Buffer.from(chunk), options.final && index === chunks.length - 1))
    return { printed, stream }
  }

  test('a progress bar redrawn across chunks is printed once, in its last state, when its line ends', () => {
    const { printed } = feed(['start\r\n\r 10%', '\r 50%', '\r100%\r\ndone\r\n'])
    expect(printed).toEqual(['start\n', '', '100%\ndone\n'])
  })

  test('a last line that was not redrawn (a prompt) is printed at once', () => {
    const { printed, stream } = feed(['>>> '], { final: false })
    expect(printed).toEqual(['>>> '])
    expect(stream.pendingBytes).toBe(0)
  })

  test('an escape sequence or character split between chunks is printed whole', () => {
    const bytes = Buffer.from('\x1b[1mé\x1b[0m\r\n')
    const stream = new PlainTextStream()
    const first = stream.push(bytes.subarray(0, 3), false)
    expect(stream.pendingBytes).toBe(3)
    const second = stream.push(bytes.subarray(3, 5), false)
    const third = stream.push(bytes.subarray(5), true)
    expect(first + second + third).toBe('é\n')
  })

  test('flush prints a held redrawn line as it stands, and keeps an unfinished sequence', () => {
    const stream = new PlainTextStream()
    expect(stream.push(Buffer.from('a\r\n 10%\r 20%\x1b['), false)).toBe('a\n')
    expect(stream.flush()).toBe(' 20%')
    expect(stream.pendingBytes).toBe(2)
  })
})
