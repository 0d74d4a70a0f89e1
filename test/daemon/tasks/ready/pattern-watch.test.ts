import { describe, expect, test } from 'vitest'
import type { OutputSource } from '../../../../spool/index.js'
import { compileLinePattern } from '../../../../daemon/tasks/output/line-pattern.js'
import { firstMatchingLine } from '../../../../daemon/tasks/ready/pattern-watch.js'

/** Output that grows by one chunk each time the watch waits for more. */
function growingOutput(chunks: string[]): { source: () => OutputSource; waitForChange: () => Promise<void>; waits: () => number } {
  let shown = Buffer.from(chunks.shift() ?? '')
  let waits = 0
  const source: OutputSource = {
    size: async () => shown.length,
    read: async (from, maxBytes) => shown.subarray(from, from + maxBytes),
  }
  return {
    source: () => source,
    waitForChange: async () => {
      waits++
      const next = chunks.shift()
      if (next !== undefined) shown = Buffer.concat([shown, Buffer.from(next)])
    },
    waits: () => waits,
  }
}

describe('firstMatchingLine', () => {
  test('answers the first complete line that matches, across writes that cut lines anywhere', async () => {
    const output = growingOutput(['starting\nlisten', 'ing on 80', '80\nlistening on 9090\n'])
    const line = await firstMatchingLine({ pattern: compileLinePattern('listening on \\d+$', 'test'), signal: new AbortController().signal, ...output })
    expect(line).toBe('listening on 8080')
  })

  test('an unfinished line is not tried until it ends', async () => {
    const output = growingOutput(['ready', '\n'])
    const line = await firstMatchingLine({ pattern: compileLinePattern('^ready$', 'test'), signal: new AbortController().signal, ...output })
    expect(line).toBe('ready')
    expect(output.waits()).toBe(1)
  })

  test('a line is tried as plain text: colours and carriage returns are gone', async () => {
    const output = growingOutput(['\u001b[32mServer up\u001b[0m on 3000\r\n'])
    const line = await firstMatchingLine({ pattern: compileLinePattern('^Server up on 3000$', 'test'), signal: new AbortController().signal, ...output })
    expect(line).toBe('Server up on 3000')
  })

  test('answers null once stopped', async () => {
    const abort = new AbortController()
    const output = growingOutput(['nothing\n'])
    const watching = firstMatchingLine({
      pattern: compileLinePattern('never', 'test'),
      signal: abort.signal,
      source: output.source,
      waitForChange: async () => abort.abort(),
    })
    expect(await watching).toBeNull()
  })
})
