import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { readFile, readdir, stat } from 'node:fs/promises'
import { localIds } from './local-ids.js'
import { requireDaemonProgram } from '../daemon-programs.js'

/**
 * Each owner's task uid and gid (the same number), for a root daemon whose sandboxed tasks run on
 * identities of their own. The kernel counts inotify instances, pending signals, message queue
 * bytes, keys, user namespaces and processes per uid: owners on one uid would share those budgets,
 * and one owner's task could use them up for all the others. So each owner gets an id of its own.
 *
 * An owner's id is derived from a hash of the home's real path and the owner (the same at every
 * start, so a task resumed after a restart keeps its owner's id), then the next one is taken while
 * the candidate is:
 * - held by another owner of this daemon (ids are assigned one at a time, so never twice);
 * - known to the user or group database, or inside a subordinate range (/etc/subuid, /etc/subgid);
 * - the real uid of a live process on the host (another daemon's task, a leftover of this one's
 *   that no record names): a collision with another home's owner is avoided while either runs.
 *
 * An id can be taken after its owner got it (`useradd -u`, `groupadd -g`): that user would own the
 * user namespaces of the owner's next tasks, and reach their folders through /proc/<pid>/root. So
 * at every launch the owner's id is looked up again in the machine's own account files (local-ids.ts:
 * stat-cached, no child process), and an owner whose id they now hold gets a new one. A user only
 * a directory service knows is not in those files: it is seen only when an id is first chosen.
 */

/** Where task identities are taken from: ids no distribution, systemd or container range hands out. */
export const TASK_ID_FIRST = 1879048192
export const TASK_ID_LAST = 2147483646
/** systemd's "foreign" range (images of other systems), inside the one above: left alone. */
const FOREIGN_FIRST = 2147352576
const FOREIGN_LAST = 2147418111
/** How many ids after an owner's own are tried before giving up. */
export const MAX_PROBES = 4096
const GETENT_TIMEOUT_MS = 5000

export type OwnerIdsResult = { uid: number; gid: number } | { problem: string }

/**
 * The first id from `seed`'s place in the range on that `taken` does not hold (systemd's foreign
 * range skipped); null when the next MAX_PROBES are all taken.
 */
export async function chooseTaskId(seed: string, taken: (id: number) => boolean | Promise<boolean>): Promise<number | null> {
  const span = TASK_ID_LAST - TASK_ID_FIRST + 1
  const offset = createHash('sha256').update(seed).digest().readUInt32BE(0) % span
  for (let step = 0; step < MAX_PROBES; step++) {
    const id = TASK_ID_FIRST + ((offset + step) % span)
    if (id >= FOREIGN_FIRST && id <= FOREIGN_LAST) continue
    if (!(await taken(id))) return id
  }
  return null
}

/** Whether NSS knows `id` as a user or a group, or a subordinate range holds it; rejects when getent cannot answer. */
export async function idTaken(id: number): Promise<boolean> {
  for (const database of ['passwd', 'group']) {
    // getent: 0 found, 2 not found; anything else is no answer.
    const status = await getent(database, id)
    if (status === 0) return true
  }
  return (await subordinateRanges()).some(([first, count]) => id >= first && id < first + count)
}

function getent(database: string, id: number): Promise<number> {
  return new Promise((resolve, reject) => {
    execFile(requireDaemonProgram('getent'), [database, String(id)], { encoding: 'utf8', timeout: GETENT_TIMEOUT_MS }, (error, _stdout, stderr) => {
      if (!error) return resolve(0)
      // An exit status is a number; a program that could not run has an errno name here.
      const code: unknown = (error as { code?: unknown }).code
      if (code === 2) return resolve(2)
      reject(
        new Error(
          `getent ${database} ${id} ${typeof code === 'number' ? `exited ${code}` : `could not run: ${error.message}`}` +
            `${stderr.trim() ? `: ${stderr.trim()}` : ''}`,
        ),
      )
    })
  })
}

async function subordinateRanges(): Promise<Array<[number, number]>> {
  const ranges: Array<[number, number]> = []
  for (const file of ['/etc/subuid', '/etc/subgid']) {
    const text = await readFile(file, 'utf8').catch(() => '')
    for (const line of text.split('\n')) {
      const [, first, count] = line.trim().split(':')
      if (first && count && /^\d+$/.test(first) && /^\d+$/.test(count)) ranges.push([Number(first), Number(count)])
    }
  }
  return ranges
}

/** The owners (uid of /proc/<pid>) of the host's live processes. */
export async function liveProcessUids(): Promise<Set<number>> {
  const uids = new Set<number>()
  const entries = (await readdir('/proc')).filter((name) => /^\d+$/.test(name))
  await Promise.all(
    entries.map(async (pid) => {
      // Gone meanwhile: nothing to count.
      const info = await stat(`/proc/${pid}`).catch(() => null)
      if (info) uids.add(info.uid)
    }),
  )
  return uids
}

export interface OwnerIdsOptions {
  /** Whether the user or group database, or a subordinate range, holds an id; default idTaken. */
  taken?: (id: number) => Promise<boolean>
  /** Uids live processes run as; default liveProcessUids. */
  liveUids?: () => Promise<Set<number>>
  /** Whether the machine's account files hold an id now (cheap: asked at every launch); default localIds.holds. */
  heldLocally?: (id: number) => boolean
}

/** The ids a daemon's owners got, one per owner and never one for two (see above). */
export class OwnerIds {
  private readonly idOf = new Map<string, number>()
  private readonly ownerOf = new Map<number, string>()
  /** Assignments run one after the other: two new owners never probe their way onto one id. */
  private assigning: Promise<unknown> = Promise.resolve()

  constructor(
    private readonly homeRealPath: string,
    private readonly options: OwnerIdsOptions = {},
  ) {}

  /**
   * The owner's ids, assigned at its first task and again when a user or group of the machine has
   * taken them since; a problem when none could be (then its tasks are not run).
   */
  idsFor(owner: string): Promise<OwnerIdsResult> {
    const known = this.current(owner)
    if (known !== undefined) return Promise.resolve({ uid: known, gid: known })
    const assigned = this.assigning.then(() => this.assign(owner))
    this.assigning = assigned.catch(() => undefined)
    return assigned
  }

  /** The owner's id while the machine's account files do not hold it. */
  private current(owner: string): number | undefined {
    const known = this.idOf.get(owner)
    return known !== undefined && !this.heldLocally(known) ? known : undefined
  }

  private heldLocally(id: number): boolean {
    return (this.options.heldLocally ?? ((each: number) => localIds.holds(each)))(id)
  }

  /** Records that a task of `owner` still runs on `id` (from an earlier daemon): the owner keeps it, unless either is spoken for. */
  adopt(owner: string, id: number): void {
    if (this.idOf.has(owner) || this.ownerOf.has(id)) return
    this.idOf.set(owner, id)
    this.ownerOf.set(id, owner)
  }

  /** Every owner with an id, in the order they got it. */
  list(): Array<{ owner: string; uid: number; gid: number }> {
    return [...this.idOf].map(([owner, id]) => ({ owner, uid: id, gid: id }))
  }

  private async assign(owner: string): Promise<OwnerIdsResult> {
    const known = this.current(owner)
    if (known !== undefined) return { uid: known, gid: known }
    // An id taken since stays spoken for (its owner's earlier tasks may still run on it): the owner moves on.
    this.idOf.delete(owner)
    const taken = this.options.taken ?? idTaken
    let id: number | null
    try {
      const live = await (this.options.liveUids ?? liveProcessUids)()
      id = await chooseTaskId(
        `${this.homeRealPath}\0${owner}`,
        async (candidate) => this.ownerOf.has(candidate) || live.has(candidate) || this.heldLocally(candidate) || (await taken(candidate)),
      )
    } catch (error) {
      return { problem: `no uid could be chosen for the tasks of ${owner}: ${(error as Error).message}` }
    }
    if (id === null)
      return {
        problem:
          `no uid is free for the tasks of ${owner}` +
          ` (the next ${MAX_PROBES} from its own are held by other owners, processes, the user database or a subordinate range)`,
      }
    this.idOf.set(owner, id)
    this.ownerOf.set(id, owner)
    return { uid: id, gid: id }
  }
}
