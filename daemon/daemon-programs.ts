import { findSafeProgram } from '../protocol/program-folders.js'

/*
 * The programs the daemon itself runs by name (bubblewrap, flock, chattr, getent, id). Never by a
 * bare name, which execFile would look up on the whole PATH: a daemon started from an npm script has
 * node_modules/.bin of every folder above the project first on it, and one of those may be another
 * user's, who would then choose what the daemon (root, often) runs. Only PATH's folders that no one
 * but root or the daemon's uid can change count (protocol/program-folders.ts).
 */

/** The daemon's own uid: the rule's "U". */
const daemonUid = (): number => process.geteuid!()

/** A program by name in the safe folders of `path` (default: the daemon's PATH), or null. */
export function daemonProgram(name: string, path: string | undefined = process.env.PATH): string | null {
  return findSafeProgram(name, path, daemonUid())
}

/** The same, or an Error that says where it was looked for. */
export function requireDaemonProgram(name: string, path: string | undefined = process.env.PATH): string {
  const found = daemonProgram(name, path)
  if (found === null) throw new Error(`${name} was not found on PATH in a folder that only root or uid ${daemonUid()} can change`)
  return found
}
