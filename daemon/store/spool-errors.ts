import { TendError } from '../../protocol/index.js'

/** errno codes that mean the disk, or the user's quota on it, has no room left. */
const NO_SPACE_CODES = new Set(['ENOSPC', 'EDQUOT'])
/** errno codes that say the whole file system refuses writes, whichever file is written. */
const SPOOL_WIDE_CODES = new Set(['ENOSPC', 'EDQUOT', 'EROFS', 'EIO'])

function codeOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code
}

/** Whether a failed write failed for lack of space (it can succeed once space is freed). */
export function isNoSpace(error: unknown): boolean {
  const code = codeOf(error)
  return code !== undefined && NO_SPACE_CODES.has(code)
}

/**
 * What a failed record write says about the spool as a whole, as `tend status` shows it; null when
 * the failure is one task's own (its folder replaced or gone), not the file system's.
 */
export function spoolProblem(error: unknown): string | null {
  const code = codeOf(error)
  if (code === undefined || !SPOOL_WIDE_CODES.has(code)) return null
  if (NO_SPACE_CODES.has(code)) return `no space left on the spool's disk (${code})`
  if (code === 'EROFS') return "the spool's file system is read-only (EROFS)"
  return `the spool's disk answers writes with an I/O error (${code})`
}

/**
 * A failed spool write as it leaves the daemon: TEND_ERR_SPOOL_FULL (507, retryable once space is
 * freed) when the disk or quota is full, TEND_ERR_SPOOL_READ_ONLY (503) when its file system is
 * read-only, TEND_ERR_SPOOL_IO (500) for any other failure. `detail` says what was being written
 * (`writing task.json of <id>`); the original error is the cause. A TendError passes through unchanged.
 */
export function spoolWriteError(error: unknown, detail: string): TendError {
  if (error instanceof TendError) return error
  const message = `${detail}: ${(error as Error | undefined)?.message ?? String(error)}`
  const code = isNoSpace(error) ? 'TEND_ERR_SPOOL_FULL' : codeOf(error) === 'EROFS' ? 'TEND_ERR_SPOOL_READ_ONLY' : 'TEND_ERR_SPOOL_IO'
  return new TendError(code, { detail: message }, { cause: error })
}
