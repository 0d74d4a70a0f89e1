import { lchownSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

/** Gives a planted tree to `owner`, as a user's own project or home would be: links themselves, never followed. */
export function chownTree(path: string, owner: { uid: number; gid: number }): void {
  lchownSync(path, owner.uid, owner.gid)
  let entries: string[] = []
  try {
    entries = readdirSync(path)
  } catch {
    return
  }
  for (const name of entries) chownTree(join(path, name), owner)
}
