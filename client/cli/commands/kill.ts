import type { Command } from 'commander'
import { action } from '../command-context.js'
import { durationOption } from '../option-parsers.js'
import { addTargetOptions } from '../resolve-target.js'
import { TASK_REF_HELP } from '../task-target.js'

export function registerKillCommand(program: Command): void {
  const command = program
    .command('kill')
    .summary('stop a task and its whole process tree')
    .argument('<id>', TASK_REF_HELP)
    .option('-s, --signal <signal>', 'first signal (name or number; default TERM)')
    .option('--grace <duration>', 'time before KILL (default 3s)', durationOption)
  addTargetOptions(command)
  command.action(
    action(command, async ({ io, tasks }, id: string, flags: { signal?: string; grace?: number }) => {
      const signal = flags.signal !== undefined && /^\d+$/.test(flags.signal) ? Number(flags.signal) : flags.signal?.toUpperCase()
      return (await tasks()).kill(io, id, { signal, graceMs: flags.grace })
    }),
  )
}
