import type { Command } from 'commander'
import { TendError } from '../../protocol/index.js'

/**
 * `tend worker` is dispatched by bin/tend.js straight to daemon/ (a daemon that also runs a
 * cluster's tasks); it is listed here so that help shows it and its flags.
 */
export function registerWorkerCommand(program: Command): void {
  program
    .command('worker')
    .summary("run the daemon in the foreground, also taking tasks from a cluster's shared queue (Redis)")
    .option('--redis-url-file <file>', "a 0600 file holding the cluster's Redis URL, with its password (default: TEND_REDIS_URL)")
    .option('--redis <url>', "the cluster's Redis without a password, redis://host:port (a password here is refused: every local user reads argv)")
    .option('--queue <name>', "the cluster's queue (default: tend)")
    .option('--concurrency <n>', 'cluster tasks run at once (default: 4)')
    .option('--labels <k=v,...>', 'labels of this worker: tasks that --require them run here')
    .option('--name <name>', 'how other machines know this worker (default: host name and home)')
    .option('--stall <duration>', 'how long this worker may go silent before its tasks count as lost (default: 10s; 2s, 30s, 1m)')
    .option('--allow-sandbox <profile,...>', 'sandbox profiles of the jobs this worker runs, repeatable (default: workspace,strict; off must be named)')
    .option('--json', 'say where it is connected, and each change (Redis lost, back), as a JSON document a line on stderr')
    .action(() => {
      throw new TendError('TEND_ERR_USAGE', { detail: 'tend worker is run by bin/tend.js: run it as `tend worker --redis-url-file FILE ...`' })
    })
}
