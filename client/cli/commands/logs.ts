import type { Command } from 'commander'
import type { ReadResult } from '../../../protocol/index.js'
import type { TendClient } from '../../client.js'
import { action } from '../command-context.js'
import { EXIT } from '../exit-codes.js'
import { countOption } from '../option-parsers.js'
import { addClusterOptions, withCluster, type ClusterFlags } from '../cluster-options.js'
import { printJson, type CliIo } from '../output.js'
import { PlainTextStream } from '../plain-stream.js'
import { followOnCluster } from '../cluster-follow.js'

interface LogsFlags {
  follow?: boolean
  from?: number
  tail?: number
  plain?: boolean
}

/** Where a read starts: a byte offset or the last lines. */
type ReadStart = { from?: number; tail?: number }

/**
 * One read as `--plain` prints it: `data` its text; `next` where the bytes not printed yet start (a
 * reader goes on from there). `flush`: reading stops here, so a redrawn last line is shown as it stands.
 */
function plainRead(chunk: ReadResult, plain: PlainTextStream, flush: boolean): ReadResult {
  let text = plain.push(Buffer.from(chunk.data, 'base64'), chunk.done)
  if (flush) text += plain.flush()
  return { ...chunk, data: text, encoding: 'utf8', next: chunk.next - plain.pendingBytes }
}

/** Prints one read of a follow, or of a read to the end without one: its bytes, or its plain text; with --json one line each. */
async function printChunk(io: CliIo, chunk: ReadResult, plain: PlainTextStream | null, flush: boolean): Promise<void> {
  const shown = plain ? plainRead(chunk, plain, flush) : chunk
  const bytes = plain ? Buffer.from(shown.data) : Buffer.from(chunk.data, 'base64')
  if (io.json) io.out(JSON.stringify({ ...shown, data: bytes.toString('utf8'), encoding: 'utf8' }))
  else await io.writeRaw(bytes)
}

/** Copies a task's output to stdout until it ends: byte for byte, or with `plain` as plain text. */
export async function streamOutput(client: TendClient, io: CliIo, id: string, start: ReadStart, options: { plain?: boolean } = {}): Promise<void> {
  const plain = options.plain ? new PlainTextStream() : null
  for await (const chunk of client.follow(id, { ...start, encoding: 'base64', maxBytes: 4 * 1024 * 1024 })) {
    await printChunk(io, chunk, plain, false)
  }
}

export function registerLogsCommand(program: Command): void {
  const command = program
    .command('logs')
    .summary("print a task's output")
    .argument('<id>', 'task id')
    .option('-f, --follow', 'keep printing until the task ends (with --json: one JSON document per chunk)')
    .option('--from <byte>', 'start at this byte offset', countOption)
    .option('--tail <lines>', 'start at the last N lines', countOption)
    .option('--plain', "print text only: a terminal's control sequences removed, redrawn lines as they were left (output.log stays raw)")
  addClusterOptions(command)
  command.action(
    action(command, async ({ client, io }, id: string, flags: LogsFlags & ClusterFlags) => {
      // A cluster task's output stays on its worker: read there, through its console's API. A
      // follow goes on across the loss of that worker (cluster-follow.ts).
      const onCluster = await withCluster(flags, client.options.env, async (cluster) => {
        if (flags.follow) {
          const plain = flags.plain ? new PlainTextStream() : null
          const start: ReadStart = flags.tail !== undefined ? { tail: flags.tail } : { from: flags.from ?? 0 }
          return followOnCluster(cluster, io, id, start, (chunk) => printChunk(io, chunk, plain, false))
        }
        const { client: worker } = await cluster.workerClient(id)
        try {
          return await printLogs(worker, io, id, flags)
        } finally {
          worker.close()
        }
      })
      return onCluster ?? (await printLogs(client, io, id, flags))
    }),
  )
}

async function printLogs(client: TendClient, io: CliIo, id: string, flags: LogsFlags): Promise<number> {
  const start: ReadStart = flags.tail !== undefined ? { tail: flags.tail } : { from: flags.from ?? 0 }
  if (flags.follow) {
    await streamOutput(client, io, id, start, { plain: flags.plain })
    return EXIT.ok
  }
  const plain = flags.plain ? new PlainTextStream() : null
  if (io.json) {
    const read = plain ? plainRead(await client.read(id, { ...start, encoding: 'base64', maxBytes: 16 * 1024 * 1024 }), plain, true) : await client.read(id, { ...start, maxBytes: 16 * 1024 * 1024 })
    printJson(io, read)
    return EXIT.ok
  }
  // Without --follow: everything there is now, in chunks, then stop.
  let cursor: ReadStart = start
  for (;;) {
    const chunk = await client.read(id, { ...cursor, encoding: 'base64', maxBytes: 4 * 1024 * 1024 })
    await printChunk(io, chunk, plain, !chunk.truncated)
    if (!chunk.truncated) return EXIT.ok
    cursor = { from: chunk.next }
  }
}
