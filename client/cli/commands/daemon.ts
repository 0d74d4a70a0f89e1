import type { Command } from 'commander'
import { TendError } from '../../../protocol/index.js'

/**
 * `tend daemon` is dispatched by bin/tend.js straight to daemon/ (the client never imports the
 * daemon); it is listed here so that help shows it.
 */
export function registerDaemonCommand(program: Command): void {
  program
    .command('daemon')
    .summary('run the daemon in the foreground')
    .action(() => {
      throw new TendError('TEND_ERR_USAGE', { detail: 'tend daemon takes no flags but --json: run it as `tend daemon`' })
    })
}
