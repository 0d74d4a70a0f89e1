import type { Command } from 'commander'
import { TendClient } from '../client.js'
import { createIo, reportError, type CliIo } from './output.js'
import { exitCodeForError } from './exit-codes.js'

export interface CommandContext {
  io: CliIo
  client: TendClient
}

/**
 * Wraps a command's action: builds the client and io from the global flags, turns thrown errors
 * into a message and an exit code, and always releases the client.
 */
export function action<Args extends unknown[]>(
  command: Command,
  run: (context: CommandContext, ...args: Args) => Promise<number>,
  onError?: (error: unknown, ...args: Args) => number,
): (...args: Args) => Promise<void> {
  return async (...args: Args) => {
    const globals = command.optsWithGlobals<{ json?: boolean }>()
    const client = new TendClient()
    const io = createIo(Boolean(globals.json), client.options.env)
    try {
      process.exitCode = await run({ io, client }, ...args)
    } catch (error) {
      reportError(io, error)
      process.exitCode = onError ? onError(error, ...args) : exitCodeForError(error)
    } finally {
      client.close()
    }
  }
}
