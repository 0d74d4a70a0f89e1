/**
 * The pause before retry number `retry` (0 for the first) of an exponential backoff: `firstMs`,
 * doubled at each retry, never more than `maxMs`.
 */
export function backoffMs(retry: number, firstMs: number, maxMs: number): number {
  return Math.min(firstMs * 2 ** Math.max(0, retry), maxMs)
}
