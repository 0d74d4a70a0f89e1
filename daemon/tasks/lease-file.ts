import { rename } from 'node:fs/promises'
import { join } from 'node:path'
import { openRegularFileForWrite } from '../../spool/index.js'

/**
 * A task's lease: the file `lease` in its spool folder holds until when, in CLOCK_MONOTONIC
 * milliseconds, its keeper lets it run (daemon/spawner/lifeline.c reads it every 50 ms). The
 * daemon writes it as long as it may run the task (a cluster worker: while Redis confirms its lock
 * on the task's job); a daemon that is frozen or cut off stops writing it, and the keeper ends the
 * task when it runs out, on its own, whatever the daemon does. Only tasks that end with their
 * daemon (endsWithDaemon) have a keeper that reads it.
 */
export const LEASE_FILE = 'lease'

/** CLOCK_MONOTONIC now, in milliseconds: the clock the keeper reads a lease against (libuv's hrtime is CLOCK_MONOTONIC). */
export function monotonicNowMs(): number {
  return Number(process.hrtime.bigint() / 1_000_000n)
}

/**
 * Sets the lease of the task whose spool folder this is to `ms` from now; atomic (a temporary file
 * renamed over it). The temporary file's name can be guessed by a task under `off`: a link or FIFO
 * planted there is refused, never written through or waited on, and a hard link there is unlinked,
 * never emptied and written.
 */
export async function writeLease(taskFolder: string, ms: number): Promise<void> {
  const path = join(taskFolder, LEASE_FILE)
  const temporary = `${path}.${process.pid}.tmp`
  const handle = await openRegularFileForWrite(temporary, { fresh: true })
  try {
    await handle.writeFile(`${Math.floor(monotonicNowMs() + ms)}\n`)
  } finally {
    await handle.close()
  }
  await rename(temporary, path)
}
