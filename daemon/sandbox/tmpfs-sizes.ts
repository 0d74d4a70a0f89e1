const PAGE_BYTES = 4096

/** What each private tmpfs of a sandboxed task may hold, in bytes. */
export interface TmpfsSizes {
  tmp: number
  shm: number
  cache: number
}

/**
 * The task's private /tmp, /dev/shm and ~/.cache share one cap (tmpSizeBytes): half for /tmp, a
 * quarter each for the others, in whole pages, so together they never hold more than the cap.
 * bubblewrap 0.8 can only mount each as a tmpfs of its own (a bind's source is always a host
 * path), so the cap is split rather than shared. Their pages are also charged to the memory group
 * of the task that writes them, where it has one: a memory limit covers them too.
 */
export function tmpfsSizes(totalBytes: number): TmpfsSizes {
  const pages = (bytes: number) => Math.max(PAGE_BYTES, Math.floor(bytes / PAGE_BYTES) * PAGE_BYTES)
  const quarter = pages(totalBytes / 4)
  return { tmp: pages(totalBytes - 2 * quarter), shm: quarter, cache: quarter }
}
