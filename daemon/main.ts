import type { Logger } from 'pino'
import { setFlagsFromString } from 'node:v8'
import { parseArgs } from 'node:util'
import { resolve } from 'node:path'
import { isTendError, readRedisUrlFile, redisUrlHasPassword, TendError } from '../protocol/index.js'
import { loadDaemonConfig } from './config.js'
import { startDaemon } from './run-daemon.js'

/**
 * `tend daemon`: runs in the foreground until SIGTERM, SIGINT or `tend stop`, then stops its
 * tasks, records them and exits 0. Answers the exit code for the CLI.
 */
export async function runDaemonForeground(env: Record<string, string | undefined>, print: (line: string) => void): Promise<number> {
  keepYoungGenerationSmall()
  // From before the socket listens: a daemon that answers is never one that can die of a stray error.
  const strayErrors = catchStrayErrors(print)
  // Heard from before the daemon has started: its socket serves before its cluster worker has
  // joined, and a signal in between would otherwise end it unstopped (its tasks unrecorded).
  let daemon: Awaited<ReturnType<typeof startDaemon>> | undefined
  let signalled = false
  // Heard until the stop is done: a second signal while stopping (a second Ctrl-C, a supervisor's
  // repeat) must not end the daemon with its stop half done and its tasks unrecorded.
  const onSignal = () => {
    if (signalled) return
    signalled = true
    void daemon?.stop()
  }
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)
  try {
    daemon = await startDaemon(loadDaemonConfig(env))
  } catch (error) {
    process.off('SIGTERM', onSignal)
    process.off('SIGINT', onSignal)
    strayErrors.stop()
    if (isTendError(error, 'TEND_ERR_DAEMON_RUNNING') || isTendError(error, 'TEND_ERR_HOME_UNWRITABLE')) {
      print(`tend: ${error.message}`)
      return 3
    }
    if (isTendError(error, 'TEND_ERR_DAEMON_START_FAILED')) {
      print(`tend: ${error.message}`)
      return 1
    }
    if (isTendError(error, 'TEND_ERR_CONFIG_INVALID') || isTendError(error, 'TEND_ERR_HOME_UNSAFE')) {
      print(`tend: ${error.message}`)
      return 2
    }
    throw error
  }
  strayErrors.logTo(daemon.context.log)
  if (signalled) void daemon.stop()
  await daemon.stopped
  process.off('SIGTERM', onSignal)
  process.off('SIGINT', onSignal)
  strayErrors.stop()
  return 0
}

const WORKER_USAGE =
  'tend worker [--redis-url-file FILE] [--queue NAME] [--concurrency N] [--labels k=v,...] [--name NAME] [--stall DURATION] ' +
  '[--allow-sandbox PROFILE,...] [--json]'

/**
 * `tend worker`: the daemon in the foreground, also taking tasks from a cluster's shared queue
 * (docs/cluster.md). The Redis URL comes from `--redis-url-file FILE` (0600), TEND_REDIS_URL or
 * TEND_CLUSTER_REDIS, never with its password on the command line (`--redis` takes a URL without
 * one). The flags are the cluster settings (TEND_CLUSTER_*), which they override.
 */
export async function runWorkerForeground(args: string[], env: Record<string, string | undefined>, print: (line: string) => void): Promise<number> {
  let values
  try {
    ;({ values } = parseArgs({
      args,
      options: {
        redis: { type: 'string' },
        'redis-url-file': { type: 'string' },
        queue: { type: 'string' },
        concurrency: { type: 'string' },
        labels: { type: 'string' },
        name: { type: 'string' },
        stall: { type: 'string' },
        'allow-sandbox': { type: 'string', multiple: true },
        json: { type: 'boolean' },
      },
      strict: true,
    }))
  } catch (error) {
    print(`tend worker: ${(error as Error).message} (${WORKER_USAGE})`)
    return 2
  }
  let redis: string | undefined
  try {
    redis = workerRedisUrl(values.redis, values['redis-url-file'], env)
  } catch (error) {
    print(`tend worker: ${(error as Error).message}`)
    return 2
  }
  if (!redis) {
    print(
      "tend worker: the cluster's Redis is needed: --redis-url-file FILE (a 0600 file holding the URL), " +
        'TEND_REDIS_URL, or --redis URL without a password, e.g. redis://127.0.0.1:6379',
    )
    return 2
  }
  const cluster: Record<string, string | undefined> = {
    TEND_CLUSTER_REDIS: redis,
    // Where the URL came from: the daemon hides that file from its tasks.
    TEND_REDIS_URL_FILE: values['redis-url-file'] === undefined ? undefined : resolve(values['redis-url-file']),
    TEND_CLUSTER_QUEUE: values.queue,
    TEND_CLUSTER_CONCURRENCY: values.concurrency,
    TEND_CLUSTER_LABELS: values.labels,
    TEND_CLUSTER_NAME: values.name,
    TEND_CLUSTER_STALL: values.stall,
    TEND_CLUSTER_ALLOW_SANDBOX: values['allow-sandbox']?.join(','),
    TEND_CLUSTER_NOTICES: values.json ? 'json' : undefined,
  }
  // The URL travels in this object only, never in an argv or the process's environment.
  return runDaemonForeground(
    { ...env, TEND_REDIS_URL: undefined, ...Object.fromEntries(Object.entries(cluster).filter(([, value]) => value !== undefined)) },
    print,
  )
}

/** The worker's Redis URL: from its file, the flag (refused with a password), TEND_REDIS_URL, then TEND_CLUSTER_REDIS. */
function workerRedisUrl(flag: string | undefined, file: string | undefined, env: Record<string, string | undefined>): string | undefined {
  if (flag !== undefined && redisUrlHasPassword(flag))
    throw new TendError('TEND_ERR_SECRET_IN_ARGV', { flag: '--redis', variable: 'TEND_REDIS_URL', fileFlag: '--redis-url-file' })
  if (flag !== undefined && file !== undefined) throw new TendError('TEND_ERR_USAGE', { detail: 'give --redis or --redis-url-file, not both' })
  if (file !== undefined) return readRedisUrlFile(file)
  return flag ?? (env.TEND_REDIS_URL || undefined) ?? (env.TEND_CLUSTER_REDIS || undefined)
}

/**
 * The last resort, never the fix: an error that escaped every handler is logged and the daemon
 * keeps serving. Node's default (exit) would be worse: the tasks of every owner would lose their
 * supervisor, their timeouts and their completion notices, and new requests would find no daemon.
 * Each entry in the log is a bug to fix where the error was thrown. Until the daemon's log exists
 * (while it starts), the error goes to stderr.
 */
function catchStrayErrors(print: (line: string) => void): { logTo: (log: Logger) => void; stop: () => void } {
  let log: Logger | undefined
  const onException = (error: unknown, origin: string) => {
    if (log) log.error({ err: error, origin }, 'stray error caught by the last-resort handler; the daemon keeps serving')
    else print(`tend: stray error (${origin}) caught by the last-resort handler: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
  }
  const onRejection = (reason: unknown) => onException(reason, 'unhandledRejection')
  process.on('uncaughtException', onException)
  process.on('unhandledRejection', onRejection)
  return {
    logTo: (daemonLog) => (log = daemonLog),
    stop: () => {
      process.off('uncaughtException', onException)
      process.off('unhandledRejection', onRejection)
    },
  }
}

/**
 * V8 grows the young generation's semi-spaces from 1 to 16 MiB each as soon as the daemon
 * allocates briskly (a burst of requests), and never gives them back: ~30 MiB of resident memory
 * that a daemon mostly idle does not need. A growth factor of 1 keeps them at their first size.
 * Set at run time, before the daemon allocates: `--max-semi-space-size` would need the node
 * command line, which `tend daemon` does not own.
 */
function keepYoungGenerationSmall(): void {
  setFlagsFromString('--semi-space-growth-factor=1')
}
