/**
 * The one byte range a `Range` header asks of a file of `size` bytes (RFC 9110, 14.1.2):
 * `bytes=a-b`, `bytes=a-` or the suffix `bytes=-n`, a last byte past the end read as the end.
 * Answers the inclusive range to send; 'unsatisfiable' when it starts at or past the end (or asks
 * for no byte: 416); null when the whole file is the answer (no header, another unit, several
 * ranges, or a header that is not one well-formed range: a server may ignore Range, 200).
 */
export function requestedRange(header: string | undefined, size: number): { start: number; end: number } | 'unsatisfiable' | null {
  if (header === undefined) return null
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim())
  if (!match) return null
  const [, first = '', last = ''] = match
  if (first === '' && last === '') return null
  if (first === '') {
    const suffix = Number(last)
    if (!Number.isSafeInteger(suffix)) return null
    if (suffix === 0 || size === 0) return 'unsatisfiable'
    return { start: Math.max(0, size - suffix), end: size - 1 }
  }
  const start = Number(first)
  const end = last === '' ? Infinity : Number(last)
  if (!Number.isSafeInteger(start) || (last !== '' && !Number.isSafeInteger(end)) || end < start) return null
  if (start >= size) return 'unsatisfiable'
  return { start, end: Math.min(end, size - 1) }
}
