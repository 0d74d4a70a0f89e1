import type { Command } from 'commander'
import { exitStatusOf, isFinished, sandboxHint } from '../../../protocol/index.js'
import { action } from '../command-context.js'
import { EXIT, exitCodeForError } from '../exit-codes.js'
import { durationOption } from '../option-parsers.js'
import { printJson } from '../output.js'
import { addClusterOptions, withCluster, type ClusterFlags } from '../cluster-options.js'

export function registerWaitCommand(program: Command): void {
  const command = program
    .command('wait')
    .summary('block until a task ends; exit with its status')
    .argument('<id>', 'task id')
    .option('--timeout <duration>', 'give up after this long (exit 75)', durationOption)
  addClusterOptions(command)
  command.action(
    action(
      command,
      async ({ client, io }, id: string, flags: { timeout?: number } & ClusterFlags) => {
        const onCluster = await withCluster(flags, client.options.env, (cluster) => cluster.wait(id, { timeoutMs: flags.timeout }))
        if (onCluster && !onCluster.task) {
          if (io.json) printJson(io, onCluster)
          else io.err(`tend: task ${id} is ${onCluster.state}${onCluster.worker ? ` on ${onCluster.worker}` : ''}${onCluster.reason ? `: ${onCluster.reason}` : ''}`)
          return onCluster.state === 'failed' ? EXIT.waitFailed : EXIT.waitTimedOut
        }
        const task = onCluster?.task ?? (await client.wait(id, { timeoutMs: flags.timeout }))
        if (io.json) printJson(io, task)
        if (!isFinished(task)) {
          if (!io.json) io.err(`tend: task ${id} is still ${task.state} after the --timeout`)
          return EXIT.waitTimedOut
        }
        if (!io.json && task.state !== 'exited') io.err(`tend: task ${id} ${task.state}: ${task.reason ?? ''}`.trimEnd())
        const hint = sandboxHint(task)
        if (hint) io.err(hint)
        return exitStatusOf(task) ?? EXIT.waitFailed
      },
      (error) => {
        const code = exitCodeForError(error)
        return code === EXIT.usage ? code : EXIT.waitFailed
      },
    ),
  )
}
