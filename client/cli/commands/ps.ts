import type { Command } from 'commander'
import { taskLabel } from '../../../protocol/index.js'
import { action } from '../command-context.js'
import { EXIT } from '../exit-codes.js'
import { ageOf, exitText, formatTable, outputText, paintState, printJson } from '../output.js'

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
      const rows = tasks.map((task) => [task.id, paintState(io, task), exitText(task), ageOf(task, now), outputText(task), task.owner, taskLabel(task)])
      io.out(formatTable(['ID', 'STATE', 'EXIT', 'AGE', 'OUTPUT', 'OWNER', 'COMMAND'], rows))
      return EXIT.ok
    }),
  )
}
