import { setTimeout as delay } from 'node:timers/promises'
import { readTaskExitFile } from '../../spawn/exit-file.js'
import type { KeeperRef, Spawner } from '../../spawn/spawner.js'

/** How long an ended task waits for its keeper's exit file at most (a full disk makes the keeper retry, then give up). */
const KEEPER_WRITE_WAIT_MS = 1000

export interface KeeperWrite {
  spoolRoot: string
  id: string
  /** The task's leader, as its exit file names it. */
  pid: number
  keeper: KeeperRef
  /** The task's exit file, as it was given to spawn(). */
  exitFile: string
  spawner: Spawner
}

/**
 * Resolves once the task's keeper has written its exit file, or after KEEPER_WRITE_WAIT_MS. The
 * keeper writes the file before it reports the exit, so it is there at once; only a first write
 * that failed (a full disk) leaves it to the keeper's retries, after the report, and the keeper
 * exits once the file is written or given up: the spawner tells that exit (an attach to the keeper
 * settles when it has gone; one that is gone already is refused). A task recorded ended before
 * that would be reported ended while its keeper still writes into its folder, and an `rm` right
 * after `wait` would race that write (ENOTEMPTY).
 */
export async function keeperWritten(write: KeeperWrite): Promise<void> {
  if (readTaskExitFile(write.spoolRoot, write.id)?.pid === write.pid) return
  const attached = await write.spawner.attach({ keeper: write.keeper, taskPid: write.pid, exitFile: write.exitFile })
  if (!attached.attached) return
  const waited = new AbortController()
  await Promise.race([
    attached.exited.catch(() => undefined),
    delay(KEEPER_WRITE_WAIT_MS, undefined, { ref: false, signal: waited.signal }).catch(() => undefined),
  ])
  waited.abort()
}
