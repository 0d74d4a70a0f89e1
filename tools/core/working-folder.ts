import { constants } from 'node:fs'
import { access, realpath, stat } from 'node:fs/promises'
import { isAbsolute } from 'node:path'
import { fileURLToPath } from 'node:url'

/** A folder a host names as the agent's work (an MCP client's root, a session's folder), and where it came from. */
export interface FolderCandidate {
  path: string
  /** Said in a refusal of the default: "the folder tend mcp was started in". */
  source: string
}

/** Where a call without cwd runs when its host names no usable folder. */
export function processFolder(source = 'the folder the agent process runs in'): FolderCandidate {
  return { path: process.cwd(), source }
}

/**
 * The first candidate that is a real folder the tools' process can enter and read, by its real
 * path; else `fallback`. A host's folder is a hint, never trusted as given: a path that is missing,
 * not a folder or unreadable is skipped.
 */
export async function chooseWorkingFolder(candidates: readonly FolderCandidate[], fallback: FolderCandidate = processFolder()): Promise<FolderCandidate> {
  for (const candidate of candidates) {
    const path = await usableFolder(candidate.path)
    if (path !== undefined) return { path, source: candidate.source }
  }
  return fallback
}

async function usableFolder(path: string): Promise<string | undefined> {
  if (!isAbsolute(path)) return undefined
  try {
    const real = await realpath(path)
    if (!(await stat(real)).isDirectory()) return undefined
    await access(real, constants.R_OK | constants.X_OK)
    return real
  } catch {
    return undefined
  }
}

/** The local path of a `file://` URI (an MCP root), or undefined for any other URI. */
export function pathOfFileUri(uri: string): string | undefined {
  try {
    return uri.startsWith('file:') ? fileURLToPath(uri) : undefined
  } catch {
    return undefined
  }
}
