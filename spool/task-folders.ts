import { closeSync, constants, fstatSync, mkdirSync, openSync, readFileSync, realpathSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'

/**
 * The spool and its task folders by descriptor. A task under `off` runs as the daemon's uid and
 * can rename its folder and put a symbolic link (to another task's folder, to any folder of the
 * daemon's) or another folder at its name, or do the same to the spool itself; O_NOFOLLOW on a
 * file covers only its last component. So the daemon opens the spool once (no link followed, a
 * folder of its own uid) and holds it, and reaches a task's folder only through that descriptor:
 * `/proc/self/fd/<spool>/<id>` opened O_DIRECTORY|O_NOFOLLOW, which must be the folder the daemon
 * made (device and inode, kept in memory) or, for a folder found at start, a real folder of the
 * daemon's uid. Files in it are then reached as `/proc/self/fd/<folder>/<name>`: the kernel resolves
 * the folder part to that descriptor, whatever is at its name now.
 */

/** The code of the error for a task folder that is no longer the one the daemon made. */
export const FOLDER_REPLACED = 'ESTALE'

const DIRECTORY_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | constants.O_NONBLOCK

interface Identity {
  dev: number
  ino: number
}

function replaced(id: string, detail: string): NodeJS.ErrnoException {
  return Object.assign(
    new Error(`${FOLDER_REPLACED}: the spool folder of task ${id} ${detail} (replaced outside tend, or by the task itself): it is not used`),
    { code: FOLDER_REPLACED },
  )
}

function ownUid(): number {
  return process.geteuid?.() ?? 0
}

/** A task's folder held open: `path` names it by its descriptor until close(). */
export interface OpenFolder {
  path: string
  file(name: string): string
  close(): void
}

/** The mount a descriptor is on (its mnt_id), null when the kernel does not say. */
function mountOf(fd: number): string | null {
  try {
    return /^mnt_id:\s*(\d+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1] ?? null
  } catch {
    return null
  }
}

class SpoolFolders {
  private rootFd: number | null = null
  /** The spool's path with the operator's links resolved, at its first use. */
  private realRoot: string | null = null
  private rootIdentity: Identity & { mount: string | null } = { dev: 0, ino: 0, mount: null }
  /** Descriptors of the spool on a mount since left: paths naming them may still be in use. */
  private readonly retired: number[] = []
  private readonly known = new Map<string, Identity>()
  /** Folders being made on the thread pool (makeOnPool): known as soon as they are open. */
  private readonly beingMade = new Set<string>()

  constructor(private readonly spoolRoot: string) {}

  /**
   * `/proc/self/fd/<spool>`: the spool the daemon opened, whatever is at its path now; the same
   * folder mounted anew at that path is followed (followRemount).
   */
  root(): string {
    if (this.rootFd === null) {
      // The operator may have made the spool a link (to a bigger disk, say): followed once, at the
      // first use (the daemon's start), and never again: a link put there later is not the spool.
      this.realRoot ??= realpathSync(this.spoolRoot)
      const fd = openSync(this.realRoot, DIRECTORY_FLAGS)
      const info = fstatSync(fd)
      if (info.uid !== ownUid()) {
        closeSync(fd)
        throw Object.assign(new Error(`EPERM: the spool ${this.spoolRoot} belongs to uid ${info.uid}, not to the daemon's (${ownUid()})`), { code: 'EPERM' })
      }
      this.rootFd = fd
      this.rootIdentity = { dev: info.dev, ino: info.ino, mount: mountOf(fd) }
    } else {
      this.followRemount()
    }
    return `/proc/self/fd/${this.rootFd}`
  }

  /**
   * A descriptor stays on the mount it was opened on: an operator's read-only (bind) remount of the
   * spool would never be seen through it, and tend would go on writing under it. So the folder at
   * the spool's path (no link followed) is taken up when it is the very folder held (device and
   * inode) on another mount; anything else there (a link, another folder) is not, and the folder
   * held stays in use.
   */
  private followRemount(): void {
    let fd: number
    try {
      fd = openSync(this.realRoot ?? this.spoolRoot, DIRECTORY_FLAGS)
    } catch {
      return
    }
    try {
      const info = fstatSync(fd)
      const mount = mountOf(fd)
      if (info.dev === this.rootIdentity.dev && info.ino === this.rootIdentity.ino && mount !== null && mount !== this.rootIdentity.mount) {
        this.retired.push(this.rootFd!)
        this.rootFd = fd
        this.rootIdentity = { dev: info.dev, ino: info.ino, mount }
        return
      }
    } catch {
      // An fstat that fails leaves the folder held in use.
    }
    closeSync(fd)
  }

  /** Makes the task's folder (0700) in the spool; it must not exist yet. Answers it open. */
  make(id: string): OpenFolder {
    mkdirSync(join(this.root(), id), { mode: 0o700 })
    this.known.delete(id)
    return this.open(id)
  }

  /** make(), with the folder made on the thread pool: a busy disk does not hold up the daemon's thread. */
  async makeOnPool(id: string): Promise<OpenFolder> {
    this.beingMade.add(id)
    try {
      await mkdir(join(this.root(), id), { mode: 0o700 })
      this.known.delete(id)
      return this.open(id)
    } finally {
      this.beingMade.delete(id)
    }
  }

  /**
   * Opens the task's folder: no link followed, the folder the daemon made (or, not known yet, a
   * real folder of the daemon's uid, which is then known). ESTALE for anything else, ELOOP for a
   * link, ENOTDIR for a file, ENOENT when nothing is there.
   */
  open(id: string): OpenFolder {
    const fd = openSync(join(this.root(), id), DIRECTORY_FLAGS)
    try {
      const info = fstatSync(fd)
      const known = this.known.get(id)
      if (known && (known.dev !== info.dev || known.ino !== info.ino)) throw replaced(id, 'is another folder than the one tend made')
      if (!known && info.uid !== ownUid()) throw replaced(id, `belongs to uid ${info.uid}, not to the daemon's`)
      if (!known) this.known.set(id, { dev: info.dev, ino: info.ino })
    } catch (error) {
      closeSync(fd)
      throw error
    }
    const path = `/proc/self/fd/${fd}`
    let open = true
    return {
      path,
      file: (name) => `${path}/${name}`,
      close: () => {
        if (open) closeSync(fd)
        open = false
      },
    }
  }

  /** Whether the daemon made or opened a folder at this name and has not removed it (a task being created is not yet in the store). */
  isKnown(id: string): boolean {
    return this.known.has(id) || this.beingMade.has(id)
  }

  /** Lets go of the spool (the daemon stops, or a test unmounts it): opened again on the next use. */
  close(): void {
    for (const fd of this.retired.splice(0)) closeSync(fd)
    if (this.rootFd !== null) closeSync(this.rootFd)
    this.rootFd = null
  }

  /** The folder is gone (removed): a folder made later at its name is a new one. */
  forget(id: string): void {
    this.known.delete(id)
  }
}

const bySpool = new Map<string, SpoolFolders>()

/** The daemon's view of the spool at `spoolRoot` (one per spool, opened on first use). */
export function spoolFolders(spoolRoot: string): SpoolFolders {
  let folders = bySpool.get(spoolRoot)
  if (!folders) bySpool.set(spoolRoot, (folders = new SpoolFolders(spoolRoot)))
  return folders
}

/** Lets go of the spool at `spoolRoot`, and forgets its folders (the daemon's store closes). */
export function releaseSpoolFolders(spoolRoot: string): void {
  bySpool.get(spoolRoot)?.close()
  bySpool.delete(spoolRoot)
}

/** Runs `use` with the task's folder open (see SpoolFolders.open); it is closed once `use` settles. */
export async function withTaskFolder<T>(spoolRoot: string, id: string, use: (folder: OpenFolder) => Promise<T> | T): Promise<T> {
  const folder = spoolFolders(spoolRoot).open(id)
  try {
    return await use(folder)
  } finally {
    folder.close()
  }
}

/** withTaskFolder for synchronous work. */
export function withTaskFolderSync<T>(spoolRoot: string, id: string, use: (folder: OpenFolder) => T): T {
  const folder = spoolFolders(spoolRoot).open(id)
  try {
    return use(folder)
  } finally {
    folder.close()
  }
}
