import type { Command } from 'commander'
import { action } from '../command-context.js'
import { countOption } from '../option-parsers.js'
import type { LogsFlags } from '../print-output.js'
import { addTargetOptions } from '../resolve-target.js'
import { TASK_REF_HELP } from '../task-target.js'

export function registerLogsCommand(program: Command): void {
  const command = program
    .command('logs')
    .summary("print a task's output")
    .argument('<id>', TASK_REF_HELP)
    .option('-f, --follow', 'keep printing until the task ends (with --json: one JSON document per chunk)')
    .option('--from <byte>', 'start at this byte offset', countOption)
    .option('--tail <lines>', 'start at the last N lines', countOption)
    .option('--plain', "print text only: a terminal's control sequences removed, redrawn lines as they were left (output.log stays raw)")
  addTargetOptions(command)
  command.action(action(command, async ({ io, tasks }, id: string, flags: LogsFlags) => (await tasks()).logs(io, id, flags)))
}
