import type { Command } from 'commander'
import { DEFAULT_CLUSTER_QUEUE } from '../../protocol/index.js'
import type { ClusterClient } from '../cluster.js'
import { clusterUrlFromArgv, normalizeClusterChoice } from '../options.js'

export interface ClusterFlags {
  cluster?: string
  clusterUrlFile?: string
  queue?: string
}

/** --cluster, --cluster-url-file and --queue, on the commands that work on cluster tasks. */
export function addClusterOptions(command: Command): Command {
  return command
    .option('--cluster <redis-url>', "a cluster's Redis (redis://host:port, no password here): the task is on its shared queue (default: TEND_CLUSTER)")
    .option('--cluster-url-file <file>', "a 0600 file holding the cluster's Redis URL (with its password)")
    .option('--queue <name>', `the cluster's queue (default: TEND_CLUSTER_QUEUE, else ${DEFAULT_CLUSTER_QUEUE})`)
}

/**
 * Runs `work` with a client of the cluster the flags (or TEND_CLUSTER) name, closing it after;
 * answers null when no cluster is named. The cluster's code (BullMQ) loads only then.
 */
export async function withCluster<T>(flags: ClusterFlags, env: Record<string, string | undefined>, work: (cluster: ClusterClient) => Promise<T>): Promise<T | null> {
  const cluster = clusterUrlFromArgv({ flag: '--cluster', url: flags.cluster, file: flags.clusterUrlFile, fileFlag: '--cluster-url-file' })
  const chosen = normalizeClusterChoice({ cluster, clusterQueue: flags.queue, env })
  if (chosen === undefined) return null
  const { ClusterClient } = await import('../cluster.js')
  const client = new ClusterClient(chosen.redis, chosen.queue, { keyFile: chosen.keyFile })
  try {
    return await work(client)
  } finally {
    await client.close()
  }
}
