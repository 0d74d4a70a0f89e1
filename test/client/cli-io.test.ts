import { Writable } from 'node:stream'
import { describe, expect, test } from 'vitest'
import { createIo, paintState, type CliIo } from '../../client/cli/output.js'
import type { Task } from '../../protocol/index.js'

/*
 * The CLI's printing: its own colours reach a terminal, a record's control sequences never do (not
 * even the colours the CLI itself uses), and after a task's raw output tend's own lines start from
 * a clean terminal state.
 */

/** A stream that keeps what was written, a terminal or not. */
function sink(isTTY: boolean): Writable & { text: () => string; isTTY: boolean } {
  const chunks: Buffer[] = []
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(Buffer.from(chunk))
      done()
    },
  }) as Writable & { text: () => string; isTTY: boolean }
  stream.isTTY = isTTY
  stream.text = () => Buffer.concat(chunks).toString('utf8')
  return stream
}

function ioOn(isTTY: boolean): { io: CliIo; stdout: ReturnType<typeof sink>; stderr: ReturnType<typeof sink> } {
  const stdout = sink(isTTY)
  const stderr = sink(isTTY)
  return { io: createIo(false, {}, { stdout, stderr }), stdout, stderr }
}

const exited = { state: 'exited', exitCode: 0 } as Task

describe("the CLI's colours and a record's text", () => {
  test("on a terminal the state is painted; a record's own colour sequence is shown escaped, the CLI's colours among them", () => {
    const { io, stdout } = ioOn(true)
    io.out(`${paintState(io, exited)} name\u001b[30mblack\u001b[0m`)
    expect(stdout.text()).toBe('\u001b[32mexited\u001b[0m name\\u001b[30mblack\\u001b[0m\n')
  })

  test('without a terminal nothing is painted', () => {
    const { io, stdout } = ioOn(false)
    io.out(`${paintState(io, exited)} x`)
    expect(stdout.text()).toBe('exited x\n')
  })
})

describe("tend's own lines after a task's raw output", () => {
  test('on a terminal they start by cancelling any sequence the output left open and resetting its attributes, once', async () => {
    const { io, stdout, stderr } = ioOn(true)
    await io.writeRaw(Buffer.from('output\u001b[8m\u001b]0;unfinished'))
    io.err('tend: a hint')
    io.err('tend: another')
    expect(stdout.text()).toBe('output\u001b[8m\u001b]0;unfinished')
    // CAN, the ASCII character set (G0, shifted in), SGR 0, the default colours (OSC 110/111), a visible cursor.
    expect(stderr.text()).toBe('\u0018\u001b(B\u000f\u001b[0m\u001b]110\u0007\u001b]111\u0007\u001b[?25htend: a hint\ntend: another\n')
  })

  test('not on a pipe: what is piped stays as it was', async () => {
    const { io, stderr } = ioOn(false)
    await io.writeRaw(Buffer.from('output\u001b[8m'))
    io.err('tend: a hint')
    expect(stderr.text()).toBe('tend: a hint\n')
  })
})
