import { readFileSync, statSync } from 'node:fs'

/**
 * The sandbox's /etc/passwd and /etc/group for a task on an identity of its own: the host's, plus
 * an entry for the task's uid and gid, which no user database knows (whoami, id -un, Node's
 * os.userInfo(), ssh all need one). Handed to bubblewrap as in-memory data (--ro-bind-data), never
 * written anywhere. The host's files are read once and again only when they change (their stat
 * identity: device, inode, size, modification and change times): a task costs two stat calls.
 */

/** The name the task's uid and gid go by inside the sandbox, unless the host already has it. */
export const TASK_ACCOUNT_NAME = 'tend-task'
const TASK_SHELL = '/bin/sh'

export interface AccountFiles {
  passwd: Buffer
  group: Buffer
}

interface Cached {
  stamp: string
  text: string
  names: Set<string>
}

/** Reads the host's account files through a stat-checked cache; paths are given for tests. */
export class AccountFileCache {
  private readonly cached = new Map<string, Cached>()
  /** How many times a host file was read (not served from the cache). */
  reads = 0

  constructor(private readonly paths: { passwd: string; group: string } = { passwd: '/etc/passwd', group: '/etc/group' }) {}

  /** The files for a task running as `user` whose HOME is `home`. */
  filesFor(user: { uid: number; gid: number }, home: string | undefined): AccountFiles {
    const passwd = this.read(this.paths.passwd)
    const group = this.read(this.paths.group)
    const userName = freeName(passwd.names, user.uid)
    const groupName = freeName(group.names, user.gid)
    return {
      passwd: Buffer.from(`${passwd.text}${userName}:x:${user.uid}:${user.gid}:tend task:${safeField(home) ?? '/'}:${TASK_SHELL}\n`),
      group: Buffer.from(`${group.text}${groupName}:x:${user.gid}:\n`),
    }
  }

  private read(path: string): Cached {
    let stamp = 'missing'
    try {
      const info = statSync(path, { bigint: true })
      stamp = `${info.dev}:${info.ino}:${info.size}:${info.mtimeNs}:${info.ctimeNs}`
    } catch {
      // No such file on the host: the sandbox's holds the task's entry alone.
    }
    const known = this.cached.get(path)
    if (known?.stamp === stamp) return known
    let text = ''
    try {
      if (stamp !== 'missing') {
        this.reads++
        text = readFileSync(path, 'utf8')
      }
    } catch {
      // Unreadable: as missing.
    }
    if (text !== '' && !text.endsWith('\n')) text += '\n'
    const names = new Set(
      text
        .split('\n')
        .map((line) => line.slice(0, line.indexOf(':')))
        .filter(Boolean),
    )
    const entry = { stamp, text, names }
    this.cached.set(path, entry)
    return entry
  }
}

/** The host's files, shared by every task of the daemon. */
export const hostAccountFiles = new AccountFileCache()

/** tend-task, or tend-task-<id> when the host's file already names an account tend-task. */
function freeName(names: Set<string>, id: number): string {
  return names.has(TASK_ACCOUNT_NAME) ? `${TASK_ACCOUNT_NAME}-${id}` : TASK_ACCOUNT_NAME
}

/** A value fit for a passwd field: no separator, no line break (a task's HOME could hold them). */
function safeField(value: string | undefined): string | null {
  return value && value.startsWith('/') && !/[:\n\r\0]/.test(value) ? value : null
}
