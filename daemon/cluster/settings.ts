import { Type } from 'typebox'
import { parseDuration, parseLabels, readRedisUrlFile } from '../../protocol/index.js'
import { readClusterKey } from '../../protocol/sealed-env.js'

/** The daemon's settings of its part in a cluster (docs/cluster.md), among its others (config.ts). */
export const CLUSTER_SETTINGS = {
  /** Redis URL of a cluster's shared queue (docs/cluster.md): the daemon then also runs tasks from it. Default null (no cluster). */
  clusterRedis: Type.Union([Type.Null(), Type.String({ pattern: '^rediss?://' })], { default: null }),
  /**
   * A 0600 file of this user's whose first line is clusterRedis, an absolute path (what `tend worker
   * --redis-url-file` sets); read when clusterRedis is not given. Hidden from every sandboxed task. Default null.
   */
  clusterRedisUrlFile: Type.Union([Type.Null(), Type.String({ pattern: '^/' })], { default: null }),
  /** The cluster's queue name. Default tend. */
  clusterQueue: Type.String({ pattern: '^[A-Za-z0-9_.-]{1,64}$', default: 'tend' }),
  /** Cluster tasks this worker runs at once (its local tasks count apart). Default 4. */
  clusterConcurrency: Type.Integer({ minimum: 1, maximum: 1024, default: 4 }),
  /** This worker's labels: a task that requires labels runs only on a worker that has them all. Default none. */
  clusterLabels: Type.Record(Type.String({ pattern: '^[A-Za-z0-9_.-]{1,64}$' }), Type.String({ pattern: '^[A-Za-z0-9_.-]{1,64}$' }), { default: {} }),
  /** How long a worker may go without renewing its lock on a job before its task counts as lost, in milliseconds. Default 10000. */
  clusterStallMs: Type.Integer({ minimum: 1000, maximum: 600_000, default: 10_000 }),
  /** Sandbox profiles this worker runs cluster jobs in; a job asking for another fails. `off` must be named. Default workspace and strict. */
  clusterAllowSandbox: Type.Array(Type.Union([Type.Literal('off'), Type.Literal('workspace'), Type.Literal('strict')]), { default: ['workspace', 'strict'] }),
  /**
   * The cluster key (32 random bytes, a 0600 file of this user's) that seals cluster tasks'
   * environment values, an absolute path. Default null (none: such tasks are refused).
   */
  clusterKeyFile: Type.Union([Type.Null(), Type.String({ pattern: '^/' })], { default: null }),
  /**
   * How a worker tells its operator (stderr) where it is connected and each change of its link to
   * Redis: text lines, or a JSON document a line. Default text.
   */
  clusterNotices: Type.Union([Type.Literal('text'), Type.Literal('json')], { default: 'text' }),
  /** How other machines know this worker. Default: the host name and the home folder's name. */
  clusterName: Type.Union([Type.Null(), Type.String({ pattern: '^[A-Za-z0-9_.:@-]{1,128}$' })], { default: null }),
}

/** The environment variables that set them (a later one of two for the same setting wins). */
export const CLUSTER_VARIABLES = {
  TEND_CLUSTER_REDIS: { key: 'clusterRedis', parse: String },
  TEND_REDIS_URL: { key: 'clusterRedis', parse: String },
  TEND_REDIS_URL_FILE: { key: 'clusterRedisUrlFile', parse: String },
  TEND_CLUSTER_ALLOW_SANDBOX: { key: 'clusterAllowSandbox', parse: (text) => text.split(',').filter(Boolean) },
  TEND_CLUSTER_KEY_FILE: { key: 'clusterKeyFile', parse: String },
  TEND_CLUSTER_QUEUE: { key: 'clusterQueue', parse: String },
  TEND_CLUSTER_CONCURRENCY: { key: 'clusterConcurrency', parse: Number },
  TEND_CLUSTER_LABELS: { key: 'clusterLabels', parse: parseLabels },
  TEND_CLUSTER_NAME: { key: 'clusterName', parse: String },
  TEND_CLUSTER_NOTICES: { key: 'clusterNotices', parse: String },
  TEND_CLUSTER_STALL: { key: 'clusterStallMs', parse: parseDuration },
} satisfies Record<string, { key: keyof typeof CLUSTER_SETTINGS; parse: (text: string) => unknown }>

/** The variables among them (and the CLI's TEND_CLUSTER) that hold credentials. */
export const CLUSTER_CREDENTIAL_VARIABLES = ['TEND_REDIS_URL', 'TEND_CLUSTER_REDIS', 'TEND_CLUSTER']

/** The settings checked once they are valid: the files they name. */
interface ClusterFiles {
  clusterRedis: string | null
  clusterRedisUrlFile: string | null
  clusterKeyFile: string | null
}

/**
 * Reads the Redis URL from its file when no URL is given (into `settings`), and checks the cluster
 * key file; each problem goes to `problems`, named after the setting's source.
 */
export function checkClusterSettings(settings: ClusterFiles, sources: Map<string, string>, problems: string[]): void {
  const urlFile = settings.clusterRedisUrlFile
  if (problems.length === 0 && urlFile !== null && settings.clusterRedis === null) {
    settings.clusterRedis = readClusterUrl(urlFile, sources.get('clusterRedisUrlFile') ?? 'clusterRedisUrlFile', problems)
  }
  const keyFile = settings.clusterKeyFile
  if (problems.length === 0 && keyFile !== null) checkClusterKey(keyFile, sources.get('clusterKeyFile') ?? 'clusterKeyFile', problems)
}

/** The cluster key file must be there and usable at start, not at the first job that needs it. */
function checkClusterKey(path: string, source: string, problems: string[]): void {
  try {
    readClusterKey(path)
  } catch (error) {
    problems.push(`${source}: ${(error as Error).message}`)
  }
}

/** The Redis URL in the file, or null (a problem noted) when it cannot be read. */
function readClusterUrl(path: string, source: string, problems: string[]): string | null {
  try {
    return readRedisUrlFile(path)
  } catch (error) {
    problems.push(`${source}: ${(error as Error).message}`)
    return null
  }
}
