import { setTimeout as delay } from 'node:timers/promises'

/**
 * Looks at `condition` every `intervalMs` until it answers true (answers true) or `timeoutMs` has
 * passed (answers false, after one last look at the deadline: the last pause is cut to end there).
 * For what cannot be heard as it happens (a process's end seen through /proc, a lock let go).
 */
export async function pollUntil(condition: () => boolean | Promise<boolean>, timeoutMs: number, intervalMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await condition()) return true
    if (Date.now() >= deadline) return false
    await delay(Math.min(intervalMs, Math.max(1, deadline - Date.now())))
  }
}
