import type { Command } from 'commander'
import type { TendClient } from '../../client.js'
import { action } from '../command-context.js'
import { EXIT } from '../exit-codes.js'
import { countOption } from '../option-parsers.js'
import { printJson, type CliIo } from '../output.js'

interface LogsFlags {
  follow?: boolean
  from?: number
  tail?: number
}

/** Copies a task's output to stdout byte for byte until it ends. */
export async function streamOutput(client: TendClient, io: CliIo, id: string, start: { from?: number; tail?: number }): Promise<void> {
  for await (const chunk of client.follow(id, { ...start, encoding: 'base64', maxBytes: 4 * 1024 * 1024 })) {
    if (io.json) io.out(JSON.stringify({ ...chunk, data: Buffer.from(chunk.data, 'base64').toString('utf8'), encoding: 'utf8' }))
    else await io.writeRaw(Buffer.from(chunk.data, 'base64'))
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
  command.action(
    action(command, async ({ client, io }, id: string, flags: LogsFlags) => {
      const start = flags.tail !== undefined ? { tail: flags.tail } : { from: flags.from ?? 0 }
      if (flags.follow) {
        await streamOutput(client, io, id, start)
        return EXIT.ok
      }
      if (io.json) {
        printJson(io, await client.read(id, { ...start, maxBytes: 16 * 1024 * 1024 }))
        return EXIT.ok
      }
      // Without --follow: everything there is now, in chunks, then stop.
      let cursor: { from?: number; tail?: number } = start
      for (;;) {
        const chunk = await client.read(id, { ...cursor, encoding: 'base64', maxBytes: 4 * 1024 * 1024 })
        await io.writeRaw(Buffer.from(chunk.data, 'base64'))
        if (!chunk.truncated) return EXIT.ok
        cursor = { from: chunk.next }
      }
    }),
  )
}
