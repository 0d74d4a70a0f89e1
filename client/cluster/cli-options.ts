import { InvalidArgumentError, type Command } from 'commander'
import { DEFAULT_CLUSTER_QUEUE, MAX_CLUSTER_RETRIES, TendError, type Labels } from '../../protocol/index.js'
import { labelsOption } from '../cli/option-parsers.js'
import { clusterUrlFromArgv, normalizeClusterChoice, type ClusterChoice } from './cluster-choice.js'

export interface ClusterFlags {
  cluster?: string
  clusterUrlFile?: string
  queue?: string
}

/** `tend run`'s flags that only a cluster's workers honour. */
export interface ClusterRunFlags {
  require?: Labels
  retries?: number
}

/** --require and --retries, on `tend run`. */
export function addClusterRunOptions(command: Command): Command {
  return command
    .option('--require <k=v,...>', 'with --cluster: run only on a worker with these labels (repeatable)', labelsOption)
    .option(
      '--retries <n>',
      'with --cluster: when its worker is lost mid-task, run it again on another worker, up to N times (0-10; default 0); it then ends with its worker',
      retriesOption,
    )
}

/** --cluster, --cluster-url-file and --queue, on the commands that work on cluster tasks. */
export function addClusterOptions(command: Command): Command {
  return command
    .option('--cluster <redis-url>', "a cluster's Redis (redis://host:port, no password here): the task is on its shared queue (default: TEND_CLUSTER)")
    .option('--cluster-url-file <file>', "a 0600 file holding the cluster's Redis URL (with its password)")
    .option('--queue <name>', `the cluster's queue (default: TEND_CLUSTER_QUEUE, else ${DEFAULT_CLUSTER_QUEUE})`)
}

/**
 * The cluster the flags (or TEND_CLUSTER) name; undefined when none is named, where the flags
 * that only a cluster honours are refused.
 */
export function chooseCluster(flags: ClusterFlags & ClusterRunFlags, env: Record<string, string | undefined>): ClusterChoice | undefined {
  const cluster = clusterUrlFromArgv({ flag: '--cluster', url: flags.cluster, file: flags.clusterUrlFile, fileFlag: '--cluster-url-file' })
  const chosen = normalizeClusterChoice({ cluster, clusterQueue: flags.queue, env })
  if (chosen !== undefined) return chosen
  if (flags.require) throw new TendError('TEND_ERR_USAGE', { detail: '--require needs --cluster (or TEND_CLUSTER): labels belong to cluster workers' })
  if (flags.retries !== undefined)
    throw new TendError('TEND_ERR_USAGE', { detail: '--retries needs --cluster (or TEND_CLUSTER): a task runs again on another worker of a cluster' })
  return undefined
}

/** How many times a cluster task runs again when lost with its worker: 0 to MAX_CLUSTER_RETRIES. */
function retriesOption(text: string): number {
  if (!/^\d+$/.test(text) || Number(text) > MAX_CLUSTER_RETRIES)
    throw new InvalidArgumentError(`expected a whole number from 0 to ${MAX_CLUSTER_RETRIES}, got ${JSON.stringify(text)}`)
  return Number(text)
}
