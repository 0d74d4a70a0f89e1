import { setTimeout as delay } from 'node:timers/promises'
import { readTaskExitFile } from '../spawn/exit-file.js'

/** How long an ended task waits for its keeper's exit file at most (a full disk makes the keeper retry, then give up). */
const KEEPER_WRITE_WAIT_MS = 1000
const POLL_MS = 1

/**
 * Resolves once the keeper has written the exit file of the task whose leader was `pid`, or after
 * KEEPER_WRITE_WAIT_MS. The keeper writes the file before it reports the exit, so it is there at
 * once; only a first write that failed (a full disk) leaves it to the keeper's retries, after the
 * report. A task recorded ended before that would be reported ended while its keeper still writes
 * into its folder, and an `rm` right after `wait` would race that write (ENOTEMPTY).
 */
export async function keeperWritten(spoolRoot: string, id: string, pid: number): Promise<void> {
  const deadline = Date.now() + KEEPER_WRITE_WAIT_MS
  while (readTaskExitFile(spoolRoot, id)?.pid !== pid && Date.now() < deadline) await delay(POLL_MS)
}
