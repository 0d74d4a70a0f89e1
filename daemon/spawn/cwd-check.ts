import { statSync } from 'node:fs'
import { stat } from 'node:fs/promises'

/** Why a cwd cannot be used, or null. */
export async function checkCwd(cwd: string): Promise<string | null> {
  try {
    return cwdProblem(cwd, await stat(cwd))
  } catch (error) {
    return cwdError(cwd, error)
  }
}

/** checkCwd, blocking: for a caller that stats the folder synchronously right after anyway. */
export function checkCwdSync(cwd: string): string | null {
  try {
    return cwdProblem(cwd, statSync(cwd))
  } catch (error) {
    return cwdError(cwd, error)
  }
}

function cwdProblem(cwd: string, info: { isDirectory: () => boolean }): string | null {
  return info.isDirectory() ? null : `cwd is not a directory: ${cwd}`
}

function cwdError(cwd: string, error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code
  return code === 'ENOENT' ? `cwd does not exist: ${cwd}` : `cwd is not usable: ${cwd} (${code})`
}
