import type { Command } from 'commander'
import { action } from '../command-context.js'
import { EXIT } from '../exit-codes.js'
import { durationOption } from '../option-parsers.js'
import { printJson, stoppedByText } from '../output.js'
import { addClusterOptions, withCluster, type ClusterFlags } from '../cluster-options.js'

export function registerKillCommand(program: Command): void {
  const command = program
    .command('kill')
    .summary('stop a task and its whole process tree')
    .argument('<id>', 'task id')
    .option('-s, --signal <signal>', 'first signal (name or number; default TERM)')
    .option('--grace <duration>', 'time before KILL (default 3s)', durationOption)
  addClusterOptions(command)
  command.action(
    action(command, async ({ client, io }, id: string, flags: { signal?: string; grace?: number } & ClusterFlags) => {
      const signal = flags.signal !== undefined && /^\d+$/.test(flags.signal) ? Number(flags.signal) : flags.signal?.toUpperCase()
      const onCluster = await withCluster(flags, client.options.env, (cluster) => cluster.kill(id, { signal, graceMs: flags.grace }))
      if (onCluster && !onCluster.task) {
        if (io.json) printJson(io, onCluster)
        else io.out(`${id} ${onCluster.state}${onCluster.reason ? `: ${onCluster.reason}` : ''}`)
        return EXIT.ok
      }
      const task = onCluster?.task ?? (await client.kill(id, { signal, graceMs: flags.grace }))
      if (io.json) printJson(io, task)
      else io.out(`${task.id} ${task.state}${task.signal ? ` by ${task.signal}` : ''}${stoppedByText(task)}${task.reason ? `: ${task.reason}` : ''}`)
      return EXIT.ok
    }),
  )
}
