import type { Command } from 'commander'
import { TendClient } from '../client.js'
import { createIo, reportError, type CliIo } from './output.js'
import { exitCodeForError } from './exit-codes.js'
import { resolveTarget, type TargetFlags } from './resolve-target.js'
import type { TaskTarget } from './task-target.js'

export interface CommandContext {
  io: CliIo
  client: TendClient
  /**
   * Where the task verbs act: the daemon, or the queue the command's flags (or the environment)
   * name. Resolved when first asked, so that the verb's own checks of its arguments come first.
   */
  tasks: () => Promise<TaskTarget>
}

/**
 * Wraps a command's action: builds the client and io from the global flags, turns thrown errors
 * into a message and an exit code, and always releases the client (and the target, if resolved).
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
    let target: Promise<TaskTarget> | undefined
    const tasks = () => (target ??= resolveTarget(command.opts<TargetFlags>(), client))
    try {
      process.exitCode = await run({ io, client, tasks }, ...args)
    } catch (error) {
      reportError(io, error)
      process.exitCode = onError ? onError(error, ...args) : exitCodeForError(error)
    } finally {
      await target?.then((resolved) => resolved.close()).catch(() => undefined)
      client.close()
    }
  }
}
