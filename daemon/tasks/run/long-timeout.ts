/** The longest delay Node's timers take; a longer one fires at once (after ~1 ms). */
const MAX_TIMER_MS = 2 ** 31 - 1

export interface LongTimeout {
  clear(): void
}

/** setTimeout for any delay: past Node's 24.8-day limit it waits in steps, never fires early. */
export function setLongTimeout(callback: () => void, delayMs: number): LongTimeout {
  const deadline = Date.now() + delayMs
  let timer: NodeJS.Timeout
  const arm = () => {
    const remaining = deadline - Date.now()
    if (remaining > MAX_TIMER_MS) timer = setTimeout(arm, MAX_TIMER_MS)
    else timer = setTimeout(callback, Math.max(0, remaining))
    timer.unref?.()
  }
  arm()
  return { clear: () => clearTimeout(timer) }
}
