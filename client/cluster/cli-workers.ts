import type { Command } from 'commander'
import { formatDuration, formatLabels, TendError } from '../../protocol/index.js'
import { action } from '../cli/command-context.js'
import { EXIT } from '../cli/exit-codes.js'
import { formatTable, printJson } from '../cli/output.js'
import { addClusterOptions, chooseCluster, type ClusterFlags } from './cli-options.js'

/** `tend workers --cluster URL`: the live workers of a cluster, what each serves and runs. BullMQ loads only when it runs. */
export function registerWorkersCommand(program: Command): void {
  const command = program.command('workers').summary("list a cluster's live workers: labels, queues, running and queued tasks, last heartbeat")
  addClusterOptions(command)
  command.action(
    action(command, async ({ io, client }) => {
      const chosen = chooseCluster(command.opts<ClusterFlags>(), client.options.env)
      if (chosen === undefined) throw new TendError('TEND_ERR_USAGE', { detail: 'tend workers needs --cluster URL, --cluster-url-file FILE or TEND_CLUSTER' })
      const { ClusterClient } = await import('./cluster-client.js')
      const cluster = new ClusterClient(chosen.redis, chosen.queue, { keyFile: chosen.keyFile })
      try {
        const workers = await cluster.workers()
        if (io.json) printJson(io, workers)
        else if (workers.length === 0) io.err('no live workers (a worker is live while its heartbeat is in Redis)')
        else {
          const now = Date.now()
          io.out(
            formatTable(
              ['NAME', 'LABELS', 'QUEUES', 'RUNNING', 'QUEUED', 'HEARTBEAT'],
              workers.map((each) => [
                each.name,
                formatLabels(each.labels) || '-',
                each.queues.join(','),
                String(each.running),
                String(each.queued),
                `${formatDuration(Math.max(0, now - Date.parse(each.lastHeartbeat)))} ago`,
              ]),
            ),
          )
        }
        return EXIT.ok
      } finally {
        await cluster.close()
      }
    }),
  )
}
