import type { Command } from 'commander'
import { taskLabel, type Task } from '../../../protocol/index.js'
import { action } from '../command-context.js'
import { EXIT } from '../exit-codes.js'
import { ageOf, exitText, formatTable, outputText, printJson, stateCell } from '../output.js'

export function registerPsCommand(program: Command): void {
  const command = program
    .command('ps')
    .summary('list tasks (running and queued; --all adds finished ones)')
    .option('-a, --all', 'include finished tasks')
    .option('--owner <owner>', "only this owner's tasks")
  command.action(
    action(command, async ({ client, io }, flags: { all?: boolean; owner?: string }) => {
      const tasks = await client.list({ all: flags.all, owner: flags.owner })
      if (io.json) {
        printJson(io, tasks)
        return EXIT.ok
      }
      if (tasks.length === 0) {
        io.err(flags.all ? 'no tasks' : 'no running or queued tasks (tend ps --all shows finished ones)')
        return EXIT.ok
      }
      const now = Date.now()
      const rows = tasks.map((task) => [task.id, stateCell(io, task), exitText(task), ageOf(task, now), outputText(task), task.owner, commandText(task)])
      io.out(formatTable(['ID', 'STATE', 'EXIT', 'AGE', 'OUTPUT', 'OWNER', 'COMMAND'], rows))
      return EXIT.ok
    }),
  )
}

/** The command column: a corrupt entry's says what is wrong with it, after what is left of its command. */
function commandText(task: Task): string {
  if (task.state !== 'corrupt') return taskLabel(task)
  const label = taskLabel(task)
  return `${label ? `${label} ` : ''}[corrupt: ${task.reason}]`
}
