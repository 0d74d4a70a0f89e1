import { incompleteUtf8Tail, type ReadResult } from '../../protocol/index.js'
import type { TendClient } from '../client.js'
import { EXIT } from './exit-codes.js'
import { printJson, type CliIo } from './output.js'
import { PlainTextStream } from './plain-stream.js'

/** How `tend logs` reads: follow to the end, where to start, and whether as plain text. */
export interface LogsFlags {
  follow?: boolean
  from?: number
  tail?: number
  plain?: boolean
}

/** Where a read starts: a byte offset or the last lines. */
export type ReadStart = { from?: number; tail?: number }

/**
 * One read as `--plain` prints it: `data` its text; `next` where the bytes not printed yet start (a
 * reader goes on from there). `flush`: reading stops here, so a redrawn last line is shown as it stands.
 */
function plainRead(chunk: ReadResult, plain: PlainTextStream, flush: boolean): ReadResult {
  let text = plain.push(Buffer.from(chunk.data, 'base64'), chunk.done)
  if (flush) text += plain.flush()
  return { ...chunk, data: text, encoding: 'utf8', next: chunk.next - plain.pendingBytes }
}

/**
 * One read as `--json` prints it without `--plain`: its bytes as text, a character its end cuts in
 * two held in `carry` for the next read (never decoded in halves), `next` where the text ends.
 */
function textRead(chunk: ReadResult, carry: Utf8Carry): ReadResult {
  const bytes = Buffer.concat([carry.bytes, Buffer.from(chunk.data, 'base64')])
  const held = chunk.done ? 0 : incompleteUtf8Tail(bytes)
  carry.bytes = Buffer.from(bytes.subarray(bytes.length - held))
  return { ...chunk, data: bytes.subarray(0, bytes.length - held).toString('utf8'), encoding: 'utf8', next: chunk.next - held }
}

/** Bytes of a character cut in two at the end of the last read, kept for the next one. */
interface Utf8Carry {
  bytes: Buffer
}

/** How the reads of one command are printed: their bytes, their plain text, or with --json their text. */
export interface Printer {
  plain: PlainTextStream | null
  carry: Utf8Carry
}

export const printerFor = (plain: boolean | undefined): Printer => ({ plain: plain ? new PlainTextStream() : null, carry: { bytes: Buffer.alloc(0) } })

/** Prints one read of a follow, or of a read to the end without one: its bytes, or its plain text; with --json one line each. */
export async function printChunk(io: CliIo, chunk: ReadResult, printer: Printer, flush: boolean): Promise<void> {
  const { plain } = printer
  if (io.json) io.out(JSON.stringify(plain ? plainRead(chunk, plain, flush) : textRead(chunk, printer.carry)))
  else await io.writeRaw(plain ? Buffer.from(plainRead(chunk, plain, flush).data) : Buffer.from(chunk.data, 'base64'))
}

/** Copies a task's output to stdout until it ends: byte for byte, or with `plain` as plain text. */
export async function streamOutput(client: TendClient, io: CliIo, id: string, start: ReadStart, options: { plain?: boolean } = {}): Promise<void> {
  let printer = printerFor(options.plain)
  const onCutBack = (outputBytes: number, from: number) => {
    io.err(`tend: the output of ${id} was cut back to ${outputBytes} bytes (it had ${from}); reading it again from its start`)
    printer = printerFor(options.plain)
  }
  for await (const chunk of client.follow(id, { ...start, encoding: 'base64', maxBytes: 4 * 1024 * 1024, onCutBack })) {
    await printChunk(io, chunk, printer, false)
  }
}

export async function printLogs(client: TendClient, io: CliIo, id: string, flags: LogsFlags): Promise<number> {
  const start: ReadStart = flags.tail !== undefined ? { tail: flags.tail } : { from: flags.from ?? 0 }
  if (flags.follow) {
    await streamOutput(client, io, id, start, { plain: flags.plain })
    return EXIT.ok
  }
  if (io.json) {
    const plain = flags.plain ? new PlainTextStream() : null
    const read = plain
      ? plainRead(await client.read(id, { ...start, encoding: 'base64', maxBytes: 16 * 1024 * 1024 }), plain, true)
      : await client.read(id, { ...start, maxBytes: 16 * 1024 * 1024 })
    printJson(io, read)
    return EXIT.ok
  }
  // Without --follow: everything there is now, in chunks, then stop.
  const printer = printerFor(flags.plain)
  let cursor: ReadStart = start
  for (;;) {
    const chunk = await client.read(id, { ...cursor, encoding: 'base64', maxBytes: 4 * 1024 * 1024 })
    await printChunk(io, chunk, printer, !chunk.truncated)
    if (!chunk.truncated) return EXIT.ok
    cursor = { from: chunk.next }
  }
}
