import type { Command } from 'commander'
import { formatBytes } from '../../../protocol/index.js'
import { action } from '../command-context.js'
import { EXIT } from '../exit-codes.js'
import { durationOption } from '../option-parsers.js'
import { printJson } from '../output.js'

export function registerGcCommand(program: Command): void {
  const command = program
    .command('gc')
    .summary("delete finished tasks' spool by age, and every corrupt spool entry")
    .option('--older-than <duration>', 'only tasks that ended longer ago than this (default 1d; 0s for all)', durationOption)
  command.action(
    action(command, async ({ client, io }, flags: { olderThan?: number }) => {
      const result = await client.gc({ olderThanMs: flags.olderThan })
      if (io.json) printJson(io, result)
      else io.out(`removed ${result.removed.length} task${result.removed.length === 1 ? '' : 's'}, freed ${formatBytes(result.freedBytes)}`)
      return EXIT.ok
    }),
  )
}
