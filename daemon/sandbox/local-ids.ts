import { readFileSync, statSync } from 'node:fs'

/**
 * The ids this machine's own account files hold: users and their primary groups (/etc/passwd),
 * groups (/etc/group), and the subordinate ranges (/etc/subuid, /etc/subgid). Read on every task's
 * launch, so each file is parsed again only when its stat changes: a launch costs four stat calls
 * and no child process. Users and groups that only a directory service (LDAP, SSSD) knows are not
 * in these files (docs/sandbox.md says what follows from that).
 */

export interface LocalIdFiles {
  passwd: string
  group: string
  subuid: string
  subgid: string
}

const SYSTEM_FILES: LocalIdFiles = { passwd: '/etc/passwd', group: '/etc/group', subuid: '/etc/subuid', subgid: '/etc/subgid' }
/** A file changed less than this long ago may change again within its mtime's tick: it is read again at the next call. */
const SETTLED_MS = 1000

export class LocalIds {
  private readonly primaryGroups = cachedParse((text) => {
    const groups = new Map<number, number>()
    for (const fields of records(text)) {
      const uid = id(fields[2])
      const gid = id(fields[3])
      // The first entry of a uid is the one getpwuid answers with.
      if (uid !== null && gid !== null && !groups.has(uid)) groups.set(uid, gid)
    }
    return groups
  })
  private readonly groups = cachedParse(
    (text) =>
      new Set(
        records(text)
          .map((fields) => id(fields[2]))
          .filter((gid): gid is number => gid !== null),
      ),
  )
  private readonly subuids = cachedParse(ranges)
  private readonly subgids = cachedParse(ranges)

  constructor(private readonly files: LocalIdFiles = SYSTEM_FILES) {}

  /** The primary gid of `uid` in /etc/passwd; null when no entry names it. */
  primaryGroupOf(uid: number): number | null {
    return this.primaryGroups(this.files.passwd).get(uid) ?? null
  }

  /** Whether a user, a group or a subordinate range of these files holds `id`. */
  holds(id: number): boolean {
    if (this.primaryGroups(this.files.passwd).has(id) || this.groups(this.files.group).has(id)) return true
    return [this.subuids(this.files.subuid), this.subgids(this.files.subgid)].some((list) => list.some(([first, count]) => id >= first && id < first + count))
  }
}

/** The machine's files, shared by every launch. */
export const localIds = new LocalIds()

/** `parse` of a file's text ('' when it is missing or unreadable), parsed again only when the file's stat changes. */
function cachedParse<T>(parse: (text: string) => T): (path: string) => T {
  let cached: { path: string; stamp: string; value: T } | null = null
  return (path) => {
    let stamp: string | null = 'missing'
    try {
      const info = statSync(path, { bigint: true })
      stamp = Date.now() - Number(info.mtimeMs) > SETTLED_MS ? `${info.dev}:${info.ino}:${info.size}:${info.mtimeNs}:${info.ctimeNs}` : null
    } catch {
      // missing: nothing in it
    }
    if (stamp !== null && cached?.path === path && cached.stamp === stamp) return cached.value
    let text = ''
    try {
      text = readFileSync(path, 'utf8')
    } catch {
      // missing or unreadable: as empty
    }
    const value = parse(text)
    cached = stamp === null ? null : { path, stamp, value }
    return value
  }
}

/** The colon-separated fields of each line that has any. */
function records(text: string): string[][] {
  return text
    .split('\n')
    .filter((line) => line.includes(':'))
    .map((line) => line.split(':'))
}

/** first:count ranges of a subordinate id file. */
function ranges(text: string): Array<[number, number]> {
  const found: Array<[number, number]> = []
  for (const fields of records(text)) {
    const first = id(fields[1])
    const count = id(fields[2])
    if (first !== null && count !== null) found.push([first, count])
  }
  return found
}

function id(field: string | undefined): number | null {
  return field !== undefined && /^\d{1,10}$/.test(field) ? Number(field) : null
}
