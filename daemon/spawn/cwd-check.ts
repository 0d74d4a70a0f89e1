import { stat } from 'node:fs/promises'

/** Why a cwd cannot be used, or null. */
export async function checkCwd(cwd: string): Promise<string | null> {
  try {
    const info = await stat(cwd)
    return info.isDirectory() ? null : `cwd is not a directory: ${cwd}`
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    return code === 'ENOENT' ? `cwd does not exist: ${cwd}` : `cwd is not usable: ${cwd} (${code})`
  }
}
