import { readFileSync, statSync } from 'node:fs'
import { isAbsolute } from 'node:path'

/** One user of the local user database, as /etc/passwd lists it. */
export interface PasswdUser {
  name: string
  uid: number
  /** Its home as written there (absolute), or null for none usable (empty, relative, `/`). */
  home: string | null
}

const PASSWD = '/etc/passwd'
/** A file unchanged for this long is trusted to stay as read: its ctime ticks coarsely. */
const SETTLED_MS = 1000

/**
 * The users of /etc/passwd. The file, not NSS: it is what the kernel's users on this machine are
 * made with (useradd, adduser, systemd-sysusers), and reading it costs no child process. Users
 * that only a directory service (LDAP, SSSD) knows are not in it (docs/sandbox.md).
 */
export function readPasswdUsers(path = PASSWD): PasswdUser[] {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch {
    return []
  }
  const users: PasswdUser[] = []
  for (const line of text.split('\n')) {
    const fields = line.split(':')
    if (fields.length < 7 || !/^\d+$/.test(fields[2]!)) continue
    const home = fields[5]!
    users.push({ name: fields[0]!, uid: Number(fields[2]), home: isAbsolute(home) && home !== '/' ? home : null })
  }
  return users
}

/** readPasswdUsers(), read again only when the file changed; the same array while it did not. */
export function cachedPasswdUsers(path = PASSWD): () => readonly PasswdUser[] {
  let cached: { stamp: string; users: PasswdUser[] } | null = null
  return () => {
    let stamp: string | null = null
    try {
      const info = statSync(path, { bigint: true })
      if (Date.now() - Number(info.ctimeMs) > SETTLED_MS) stamp = `${info.dev}:${info.ino}:${info.ctimeNs}:${info.size}`
    } catch {
      // no user database: no users
    }
    if (stamp !== null && cached?.stamp === stamp) return cached.users
    const users = readPasswdUsers(path)
    cached = stamp === null ? null : { stamp, users }
    return users
  }
}
