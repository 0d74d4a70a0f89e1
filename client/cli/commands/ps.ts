import type { Command } from 'commander'
import { action } from '../command-context.js'
import { addTargetOptions } from '../resolve-target.js'

export function registerPsCommand(program: Command): void {
  const command = program
    .command('ps')
    .summary('list tasks (running and queued; --all adds finished ones), with CPU and memory: now for a running task, used for an ended one')
    .option('-a, --all', 'include finished tasks')
    .option('--owner <owner>', "only this owner's tasks")
  addTargetOptions(command)
  command.action(
    action(command, async ({ io, tasks }, flags: { all?: boolean; owner?: string }) => (await tasks()).list(io, { all: flags.all, owner: flags.owner })),
  )
}
