import { readRedisUrlFile, redisUrlHasPassword, TendError } from '../../protocol/index.js'

/** A cluster's Redis and queue, as the options give them, else TEND_CLUSTER and TEND_CLUSTER_QUEUE. */
export interface ClusterChoice {
  redis: string
  /** undefined: the default queue. */
  queue: string | undefined
  /** The cluster key's file (TEND_CLUSTER_KEY_FILE), which seals tasks' environment values; undefined: none. */
  keyFile: string | undefined
}

/** The cluster the options or the environment name; undefined when neither does (the local daemon). */
export function normalizeClusterChoice(options: {
  cluster?: string
  clusterQueue?: string
  clusterKeyFile?: string
  env?: Record<string, string | undefined>
}): ClusterChoice | undefined {
  const env = options.env ?? process.env
  const redis = options.cluster ?? (env.TEND_CLUSTER || undefined)
  if (redis === undefined) return undefined
  return {
    redis,
    queue: options.clusterQueue ?? (env.TEND_CLUSTER_QUEUE || undefined),
    keyFile: options.clusterKeyFile ?? (env.TEND_CLUSTER_KEY_FILE || undefined),
  }
}

/**
 * A cluster's Redis URL as a command line gives it: from its file (0600), or from the flag, which
 * must not hold a password (every local user reads /proc/PID/cmdline); undefined when neither is given.
 */
export function clusterUrlFromArgv(given: { flag: string; url: string | undefined; file: string | undefined; fileFlag: string }): string | undefined {
  if (given.url !== undefined && redisUrlHasPassword(given.url))
    throw new TendError('TEND_ERR_SECRET_IN_ARGV', { flag: given.flag, variable: 'TEND_CLUSTER', fileFlag: given.fileFlag })
  if (given.url !== undefined && given.file !== undefined)
    throw new TendError('TEND_ERR_USAGE', { detail: `give ${given.flag} or ${given.fileFlag}, not both` })
  return given.file === undefined ? given.url : readRedisUrlFile(given.file)
}

/** The options that put an agent's tasks on a cluster instead of the local daemon. */
export interface ClusterTaskOptions {
  /** A cluster's Redis (redis:// or rediss://): the tasks run on its workers. Default TEND_CLUSTER; unset: the local daemon. */
  cluster?: string
  /** The cluster's queue. Default TEND_CLUSTER_QUEUE, else the default queue. */
  clusterQueue?: string
  /** The cluster key's file, which seals tasks' environment values. Default TEND_CLUSTER_KEY_FILE. */
  clusterKeyFile?: string
}

/** The options without the cluster's: what a client of the local daemon takes. */
export function withoutClusterOptions<T extends ClusterTaskOptions>(options: T): Omit<T, keyof ClusterTaskOptions> {
  const { cluster: _cluster, clusterQueue: _clusterQueue, clusterKeyFile: _clusterKeyFile, ...rest } = options
  return rest
}
