import type { Command } from 'commander'
import { TendError } from '../../../protocol/index.js'
import { action } from '../command-context.js'
import { durationOption } from '../option-parsers.js'
import { addTargetOptions } from '../resolve-target.js'
import { TASK_REF_HELP } from '../task-target.js'

interface KillFlags {
  signal?: string
  grace?: number
  all?: boolean
  owner?: string
  yes?: boolean
}

export function registerKillCommand(program: Command): void {
  const command = program
    .command('kill')
    .summary('stop a task and its whole process tree (--all: every task, after a question)')
    .argument('[id]', TASK_REF_HELP)
    .option('-s, --signal <signal>', 'first signal (name or number; default TERM)')
    .option('--grace <duration>', 'time before KILL (default 3s)', durationOption)
    .option('--all', 'every running and queued task (asks first, listing them, unless --yes)')
    .option('--owner <owner>', "with --all: only this owner's tasks")
    .option('-y, --yes', 'with --all: kill without asking (needed without a terminal)')
  addTargetOptions(command)
  command.action(
    action(command, async ({ io, tasks }, id: string | undefined, flags: KillFlags) => {
      const signal = flags.signal !== undefined && /^\d+$/.test(flags.signal) ? Number(flags.signal) : flags.signal?.toUpperCase()
      const how = { signal, graceMs: flags.grace }
      if (flags.all) {
        if (id !== undefined) throw new TendError('TEND_ERR_USAGE', { detail: `give a task id or --all, not both (got ${JSON.stringify(id)} with --all)` })
        return (await tasks()).killAll(io, { ...how, owner: flags.owner, yes: flags.yes })
      }
      if (flags.owner !== undefined || flags.yes) throw new TendError('TEND_ERR_USAGE', { detail: '--owner and --yes go with --all' })
      if (id === undefined) throw new TendError('TEND_ERR_USAGE', { detail: 'give the task to kill (an id, a name or an id prefix), or --all' })
      return (await tasks()).kill(io, id, how)
    }),
  )
}
