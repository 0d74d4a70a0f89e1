import type { Command } from 'commander'
import { action } from '../command-context.js'
import { addTargetOptions } from '../resolve-target.js'
import { TASK_REF_HELP } from '../task-target.js'

export function registerShowCommand(program: Command): void {
  const command = program.command('show').summary('show one task').argument('<id>', TASK_REF_HELP)
  addTargetOptions(command)
  command.action(action(command, async ({ io, tasks }, id: string) => (await tasks()).show(io, id)))
}
