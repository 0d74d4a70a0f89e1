import { ADDON_PATH, loadAddon } from '../native/load-addon.js'

/** How long the daemon must have been quiet (no task event) before its free memory is released. */
export const QUIET_MS = 250

interface MemoryReleaseAddon {
  releaseFreeMemory(): boolean
}

/** The addon's release (true when pages went back to the kernel), or why there is none. */
export function loadMemoryRelease(path: string = ADDON_PATH): { release: () => boolean } | { reason: string } {
  const { addon, reason } = loadAddon<MemoryReleaseAddon>('memoryRelease', 'memory-release', ['releaseFreeMemory'], path)
  return addon ? { release: () => addon.releaseFreeMemory() } : { reason }
}

/**
 * Gives malloc's free memory back to the kernel once the daemon turns quiet: QUIET_MS after its
 * start and after each burst of task events, never while events keep coming (each one re-arms the
 * timer). An idle daemon then holds what it uses, not what its busiest moment needed: ~4 MiB after
 * a start, most of it freed by parsing and compiling the daemon's own code.
 */
export class IdleMemoryRelease {
  private timer: NodeJS.Timeout | undefined

  constructor(
    private readonly release: () => boolean,
    private readonly quietMs = QUIET_MS,
  ) {}

  /** Something happened: release only after quietMs more without activity. */
  activity(): void {
    if (this.timer) this.timer.refresh()
    else {
      this.timer = setTimeout(() => {
        this.timer = undefined
        this.release()
      }, this.quietMs)
      this.timer.unref()
    }
  }

  close(): void {
    clearTimeout(this.timer)
    this.timer = undefined
  }
}
