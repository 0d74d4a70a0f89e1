import type { Command } from 'commander'
import { taskLabel, type Task } from '../../../protocol/index.js'
import { action } from '../command-context.js'
import { EXIT } from '../exit-codes.js'
import { ageOf, exitText, formatTable, outputText, printJson, stateCell } from '../output.js'
import { addClusterOptions, withCluster, type ClusterFlags } from '../cluster-options.js'

export function registerPsCommand(program: Command): void {
  const command = program
    .command('ps')
    .summary('list tasks (running and queued; --all adds finished ones)')
    .option('-a, --all', 'include finished tasks')
    .option('--owner <owner>', "only this owner's tasks")
  addClusterOptions(command)
  command.action(
    action(command, async ({ client, io }, flags: { all?: boolean; owner?: string } & ClusterFlags) => {
      const onCluster = await withCluster(flags, client.options.env, (cluster) => cluster.list({ all: flags.all, owner: flags.owner }))
      if (onCluster) {
        if (io.json) printJson(io, onCluster)
        else if (onCluster.length === 0) io.err(flags.all ? 'no cluster tasks' : 'no running or queued cluster tasks (tend ps --all shows finished ones)')
        else io.out(formatTable(['ID', 'STATE', 'WORKER', 'QUEUE', 'COMMAND'], onCluster.map((each) => [each.id, each.state, each.worker ?? '-', each.queue || '-', each.task ? taskLabel(each.task) : ''])))
        return EXIT.ok
      }
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
