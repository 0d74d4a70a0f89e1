import { constants } from 'node:fs'
import { open, statfs, unlink } from 'node:fs/promises'
import type { Logger } from 'pino'

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

  /** Writes the file whole and syncs it; a write the disk refuses leaves no file and the reserve spent. */
  private make(): Promise<void> {
    this.making ??= (async () => {
      let handle
      try {
        // Never through a link or onto a FIFO someone put in its place; an existing file is rewritten.
        handle = await open(this.path, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600)
        if (!(await handle.stat()).isFile()) throw Object.assign(new Error(`${this.path} is not a regular file`), { code: 'EINVAL' })
        const chunk = Buffer.alloc(CHUNK_BYTES)
        for (let written = 0; written < this.bytes; ) {
          const { bytesWritten } = await handle.write(chunk, 0, Math.min(CHUNK_BYTES, this.bytes - written))
          if (bytesWritten <= 0) throw Object.assign(new Error('the write stopped'), { code: 'EIO' })
          written += bytesWritten
        }
        await handle.sync()
        await handle.close()
        this.held = true
      } catch (error) {
        await handle?.close().catch(() => undefined)
        if ((error as NodeJS.ErrnoException).code !== 'EINVAL') await unlink(this.path).catch(() => undefined)
        this.held = false
        this.log?.debug({ err: error, path: this.path }, 'spool reserve not made')
      } finally {
        this.making = null
      }
    })()
    return this.making
  }
}
