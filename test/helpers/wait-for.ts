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
