import type { Command } from 'commander'
import { action } from '../command-context.js'
import { EXIT } from '../exit-codes.js'
import { printJson } from '../output.js'

export function registerRestartCommand(program: Command): void {
  const command = program.command('restart').summary('replace the daemon (e.g. after an upgrade); running tasks keep running')
  command.action(
    action(command, async ({ client, io }) => {
      const result = await client.restartDaemon()
      if (io.json) printJson(io, result)
      else
        io.out(
          result.previousPid === null
            ? `daemon started (pid ${result.pid})`
            : `daemon restarted (pid ${result.previousPid} -> ${result.pid}); its tasks keep running`,
        )
      return EXIT.ok
    }),
  )
}
