/**
 * `promise`, or the error `timedOut` makes once `ms` have passed without it settling. The timer is
 * cleared as soon as either happens, and holds the event loop open meanwhile (a daemon's start
 * waits on it with nothing else to keep it alive). `promise` itself is not cancelled.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut()), ms)
  })
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer))
}
