import { constants } from 'node:fs'
import { lstat, open, readdir, type FileHandle } from 'node:fs/promises'
import { dirname } from 'node:path'
import { openOutputToHold, outputByDescriptor, type OutputSource } from '../../../spool/index.js'

/**
 * The output.log of each running task, held open by the daemon from before the task starts: the
 * file its keeper writes. A task (under `off`) can put anything at that name while it runs (a
 * FIFO, a link, another file, a folder), and can make a file the keeper still writes nameless
 * (rm, then a new empty output.log): through the descriptor, readers still read what it wrote,
 * and its cap still counts it (disk it would take unseen otherwise). A finished task's output is
 * read by its path again, with every check (spool/untrusted-file.ts).
 */
export class HeldOutputs {
  private readonly handles = new Map<string, FileHandle>()

  /** Holds the task's output.log from now on (before its launch, or when it is supervised again). */
  async hold(id: string, path: string): Promise<void> {
    const handle = await openOutputToHold(path)
    const earlier = this.handles.get(id)
    this.handles.set(id, handle)
    await earlier?.close()
  }

  /**
   * Holds the output.log of a task an earlier daemon started, as its keeper holds it: the one
   * regular file on the spool's disk among the keeper's descriptors (it keeps output.log open for
   * the task's whole life), opened through /proc, so that what the task did to the name while no
   * daemon ran (removed it, put another file there) changes nothing. By its name when the keeper's
   * descriptors cannot be read or do not show exactly one such file.
   */
  async holdFromKeeper(id: string, keeperPid: number, path: string): Promise<void> {
    const handle = await keepersOutput(keeperPid, (await lstat(dirname(path))).dev)
    if (!handle) return this.hold(id, path)
    const earlier = this.handles.get(id)
    this.handles.set(id, handle)
    await earlier?.close()
  }

  /** The held output.log of a running task; undefined when none is held (read it by path then). */
  held(id: string): FileHandle | undefined {
    return this.handles.get(id)
  }

  /**
   * Where readers take the task's output from now: the held file, else `byPath` (the file in its
   * folder, spool/output-read.ts taskOutput). A look that fails because the task ended meanwhile
   * (the file let go of) is made again by path.
   */
  source(id: string, byPath: OutputSource): OutputSource {
    const handle = this.handles.get(id)
    if (!handle) return byPath
    const held = outputByDescriptor(handle)
    const orByPath = <T>(look: () => Promise<T>, again: () => Promise<T>): Promise<T> =>
      look().catch((error: unknown) => (this.handles.get(id) === handle ? Promise.reject(error) : again()))
    return {
      size: () => orByPath(held.size, byPath.size),
      read: (from, maxBytes) =>
        orByPath(
          () => held.read(from, maxBytes),
          () => byPath.read(from, maxBytes),
        ),
    }
  }

  /**
   * A descriptor of its own on the held output.log (for a download, which may outlast the task):
   * opened through the daemon's descriptor (/proc/self/fd), never through a name a task could
   * replace; undefined when none is held. The caller closes it.
   */
  async reopen(id: string): Promise<FileHandle | undefined> {
    const handle = this.handles.get(id)
    if (!handle) return undefined
    try {
      return await open(`/proc/self/fd/${handle.fd}`, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY)
    } catch {
      // Let go of meanwhile (the task ended): read by its path.
      return undefined
    }
  }

  /** Lets go of the task's output.log (it has ended; readers open it by path from now on). */
  async release(id: string): Promise<void> {
    const handle = this.handles.get(id)
    this.handles.delete(id)
    await handle?.close()
  }
}

/** The one regular file on device `dev` that the keeper holds open, opened anew through /proc; null when not exactly one. */
async function keepersOutput(keeperPid: number, dev: number): Promise<FileHandle | null> {
  const folder = `/proc/${keeperPid}/fd`
  const names = await readdir(folder).catch(() => [] as string[])
  const found: Array<{ handle: FileHandle; ino: number }> = []
  for (const name of names) {
    // Opened without waiting (a FIFO among them), and only kept when it is a regular file there.
    const handle = await open(`${folder}/${name}`, constants.O_RDWR | constants.O_NONBLOCK | constants.O_NOCTTY).catch(() => null)
    if (!handle) continue
    const info = await handle.stat().catch(() => null)
    if (!info || !info.isFile() || info.dev !== dev || found.some((each) => each.ino === info.ino)) await handle.close()
    else found.push({ handle, ino: info.ino })
  }
  if (found.length === 1) return found[0]!.handle
  await Promise.all(found.map((each) => each.handle.close()))
  return null
}
