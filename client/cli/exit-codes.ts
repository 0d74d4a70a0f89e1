import { TendError } from '../../protocol/index.js'

/** tend's own exit codes (docs in README.md). A task's status is passed through by wait and run --wait. */
export const EXIT = {
  ok: 0,
  /** The daemon refused the request (no such task, task still running, ...). */
  failed: 1,
  /** Bad flags or arguments. */
  usage: 2,
  /** No daemon could be reached or started, or another daemon holds TEND_HOME. */
  unavailable: 3,
  /** `tend wait --timeout` passed while the task still ran (with --ready: while it still waited for its condition). */
  waitTimedOut: 75,
  /** wait --ready / run --wait-ready: its readiness condition did not hold within its --ready-timeout (the task runs on). */
  notReady: 76,
  /** wait --ready / run --wait-ready: the task ended before its readiness condition held. */
  endedFirst: 77,
  /** wait / run --wait: tend itself failed, so there is no task status to report. */
  waitFailed: 125,
  /** Its stdout's reader went away (`tend ps | head -1`): 128 + SIGPIPE, as a program SIGPIPE ended. */
  outputClosed: 141,
} as const

export function exitCodeForError(error: unknown): number {
  if (!(error instanceof TendError)) return EXIT.failed
  switch (error.code) {
    case 'TEND_ERR_USAGE':
    case 'TEND_ERR_CONFIG_INVALID':
    case 'TEND_ERR_VALIDATION':
    case 'TEND_ERR_INVALID_TASK_ID':
    case 'TEND_ERR_INVALID_SIGNAL':
    case 'TEND_ERR_CONSOLE_INSECURE':
    case 'TEND_ERR_CONSOLE_TLS':
    case 'TEND_ERR_SECRET_IN_ARGV':
    case 'TEND_ERR_SECRET_FILE':
    case 'TEND_ERR_CLUSTER_KEY':
      return EXIT.usage
    case 'TEND_ERR_DAEMON_UNAVAILABLE':
    case 'TEND_ERR_DAEMON_TIMEOUT':
    case 'TEND_ERR_DAEMON_START_FAILED':
    case 'TEND_ERR_DAEMON_RUNNING':
    case 'TEND_ERR_HOME_UNWRITABLE':
    case 'TEND_ERR_CLUSTER_UNAVAILABLE':
    case 'TEND_ERR_CLUSTER_WORKER':
    case 'TEND_ERR_SERVICE_UNAVAILABLE':
      return EXIT.unavailable
    default:
      return EXIT.failed
  }
}
