import { setTimeout as delay } from 'node:timers/promises'

/**
 * Waits until `condition` answers truthy, checking every 20 ms. Fails after timeoutMs with a
 * message naming what was awaited — tests never sleep a fixed time.
 */
export async function waitFor<T>(what: string, condition: () => T | Promise<T>, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  for (;;) {
    try {
      const value = await condition()
      if (value) return value as NonNullable<T>
    } catch (error) {
      last = error
    }
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`)
    }
    await delay(20)
  }
}

/**
 * Settles as `promise` does, or fails naming `what` once timeoutMs pass first: for an answer that
 * must come rather than hang, never to measure how fast it came (bench/ does that).
 */
export async function settlesWithin<T>(what: string, promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs}ms waiting for ${what}`)), timeoutMs)
  })
  try {
    return await Promise.race([promise, expired])
  } finally {
    clearTimeout(timer)
  }
}
