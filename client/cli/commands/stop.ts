import type { Command } from 'commander'
import { TendClient } from '../../client.js'
import { action } from '../command-context.js'
import { EXIT } from '../exit-codes.js'
import { printJson } from '../output.js'

export function registerStopCommand(program: Command): void {
  const command = program
    .command('stop')
    .summary('stop the daemon (its running tasks are stopped first)')
    .option('--keep-tasks', 'leave running tasks running, for the next daemon to supervise')
  command.action(
    action(command, async ({ client, io }, flags: { keepTasks?: boolean }) => {
      // Stopping must not start a daemon just to stop it.
      const quiet = new TendClient({ home: client.options.layout.home, autoStart: false })
      try {
        const result = await quiet.stopDaemon({ keepTasks: flags.keepTasks })
        if (io.json) printJson(io, result)
        else
          io.out(
            result.pid === null ? 'no daemon running' : result.stopped ? `daemon stopped (pid ${result.pid})` : `daemon (pid ${result.pid}) is still stopping`,
          )
        return result.pid === null || result.stopped ? EXIT.ok : EXIT.failed
      } finally {
        quiet.close()
      }
    }),
  )
}
