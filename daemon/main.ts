import { isTendError } from '../protocol/index.js'
import { loadDaemonConfig } from './config.js'
import { startDaemon } from './run-daemon.js'

/**
 * `tend daemon`: runs in the foreground until SIGTERM, SIGINT or `tend stop`, then stops its
 * tasks, records them and exits 0. Answers the exit code for the CLI.
 */
export async function runDaemonForeground(env: Record<string, string | undefined>, print: (line: string) => void): Promise<number> {
  let daemon
  try {
    daemon = await startDaemon(loadDaemonConfig(env))
  } catch (error) {
    if (isTendError(error, 'TEND_ERR_DAEMON_RUNNING')) {
      print(`tend: ${error.message}`)
      return 3
    }
    if (isTendError(error, 'TEND_ERR_CONFIG_INVALID')) {
      print(`tend: ${error.message}`)
      return 2
    }
    throw error
  }
  const onSignal = () => void daemon.stop()
  process.once('SIGTERM', onSignal)
  process.once('SIGINT', onSignal)
  await daemon.stopped
  process.off('SIGTERM', onSignal)
  process.off('SIGINT', onSignal)
  return 0
}
