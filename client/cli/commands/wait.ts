import type { Command } from 'commander'
import { action } from '../command-context.js'
import { EXIT, exitCodeForError } from '../exit-codes.js'
import { durationOption } from '../option-parsers.js'
import { addTargetOptions } from '../resolve-target.js'
import { TASK_REF_HELP } from '../task-target.js'

export function registerWaitCommand(program: Command): void {
  const command = program
    .command('wait')
    .summary('block until a task ends; exit with its status')
    .argument('<id>', TASK_REF_HELP)
    .option('--timeout <duration>', 'give up after this long (exit 75)', durationOption)
    .option('--ready', 'return once it is ready instead (exit 0); not ready in time: exit 76; ended first: exit 77')
  addTargetOptions(command)
  command.action(
    action(
      command,
      async ({ io, tasks }, id: string, flags: { timeout?: number; ready?: boolean }) =>
        (await tasks()).wait(io, id, { timeoutMs: flags.timeout, ...(flags.ready ? { ready: true } : {}) }),
      (error) => {
        const code = exitCodeForError(error)
        return code === EXIT.usage ? code : EXIT.waitFailed
      },
    ),
  )
}
