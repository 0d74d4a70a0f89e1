import { TendError } from '../../protocol/index.js'

/** errno codes that mean the disk, or the user's quota on it, has no room left. */
const NO_SPACE_CODES = new Set(['ENOSPC', 'EDQUOT'])

/** Whether a failed write failed for lack of space (it can succeed once space is freed). */
export function isNoSpace(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code
  return code !== undefined && NO_SPACE_CODES.has(code)
}

/**
 * A failed spool write as it leaves the daemon: TEND_ERR_SPOOL_FULL (507, retryable once space is
 * freed) when the disk or quota is full, TEND_ERR_SPOOL_IO (500) for any other failure. `detail`
 * says what was being written (`writing task.json of <id>`); the original error is the cause. A
 * TendError passes through unchanged.
 */
export function spoolWriteError(error: unknown, detail: string): TendError {
  if (error instanceof TendError) return error
  const message = `${detail}: ${(error as Error | undefined)?.message ?? String(error)}`
  return new TendError(isNoSpace(error) ? 'TEND_ERR_SPOOL_FULL' : 'TEND_ERR_SPOOL_IO', { detail: message }, { cause: error })
}
