import { close, fsync, write } from 'node:fs'
import { statfs, unlink } from 'node:fs/promises'
import { promisify } from 'node:util'
import type { Logger } from 'pino'
import { openHomeFileSync } from '../../protocol/home-file.js'

const writeAsync = promisify(write)
const fsyncAsync = promisify(fsync)
const closeAsync = promisify(close)

/** How often a spent reserve looks for room to be made again, in ms. */
const RESTORE_INTERVAL_MS = 1000
/** Written in pieces of this size: every block is allocated (a sparse file would hold nothing back). */
const CHUNK_BYTES = 64 * 1024

/**
 * Disk held back for task records, as databases keep a ballast file: a file of `bytes` zeros on the
 * spool's file system, made when the daemon starts. When a record finds the disk full, the store
 * gives the reserve up (release) and writes again into the room it left, so an ending always lands
 * even after a task filled the disk. A spent reserve is made again once the disk has room for it
 * twice over (checked every second), so that making it never takes the last free blocks.
 */
export class SpoolReserve {
  private held = false
  private restoreTimer: NodeJS.Timeout | null = null
  private making: Promise<void> | null = null

  constructor(
    private readonly path: string,
    readonly bytes: number,
    private readonly log?: Logger,
  ) {}

  /** Makes the reserve; on a disk without room for it, it is spent until there is. */
  async start(): Promise<void> {
    if (this.bytes === 0) return
    await this.make()
    if (!this.held) this.scheduleRestore()
  }

  /** Whether the reserve is in place (always true when none is kept). */
  get isHeld(): boolean {
    return this.bytes === 0 || this.held
  }

  /** Gives the reserve up; answers whether it freed anything (false when it was spent already). */
  async release(): Promise<boolean> {
    if (this.bytes === 0 || !this.held) return false
    this.held = false
    await unlink(this.path).catch((error: unknown) => this.log?.warn({ err: error, path: this.path }, 'the spool reserve could not be removed'))
    this.log?.warn({ bytes: this.bytes }, 'spool reserve given up: the disk is full')
    this.scheduleRestore()
    return true
  }

  close(): void {
    if (this.restoreTimer) clearInterval(this.restoreTimer)
    this.restoreTimer = null
  }

  private scheduleRestore(): void {
    if (this.restoreTimer) return
    this.restoreTimer = setInterval(() => void this.tryRestore(), RESTORE_INTERVAL_MS)
    this.restoreTimer.unref()
  }

  private async tryRestore(): Promise<void> {
    if (this.held || this.making) return
    const room = await statfs(this.path.slice(0, this.path.lastIndexOf('/')) || '/').then(
      (info) => info.bavail * info.bsize,
      () => 0,
    )
    if (room < 2 * this.bytes) return
    await this.make()
    if (this.held) {
      this.close()
      this.log?.info({ bytes: this.bytes }, 'spool reserve made again')
    }
  }

  /**
   * Some room may have come back (a task was removed): a spent reserve is tried again now, instead
   * of at the next check, so that new tasks are not refused for a second on a disk with room.
   */
  restoreSoon(): void {
    if (this.bytes === 0 || this.held) return
    void this.tryRestore()
  }

  /**
   * Writes the file whole and syncs it; a write the disk refuses leaves no file and the reserve
   * spent. What a task put in its place (a folder, a FIFO, a link) is moved aside (home-file.ts).
   */
  private make(): Promise<void> {
    this.making ??= (async () => {
      let fd: number | undefined
      try {
        fd = openHomeFileSync(this.path, { truncate: true }).fd
        const chunk = Buffer.alloc(CHUNK_BYTES)
        for (let written = 0; written < this.bytes; ) {
          const { bytesWritten } = await writeAsync(fd, chunk, 0, Math.min(CHUNK_BYTES, this.bytes - written))
          if (bytesWritten <= 0) throw Object.assign(new Error('the write stopped'), { code: 'EIO' })
          written += bytesWritten
        }
        await fsyncAsync(fd)
        await closeAsync(fd)
        fd = undefined
        this.held = true
      } catch (error) {
        // Only a file this open made or checked as the daemon's own is removed.
        if (fd !== undefined) {
          await closeAsync(fd).catch(() => undefined)
          await unlink(this.path).catch(() => undefined)
        }
        this.held = false
        this.log?.debug({ err: error, path: this.path }, 'spool reserve not made')
      } finally {
        this.making = null
      }
    })()
    return this.making
  }
}
