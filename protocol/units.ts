const DURATION_UNITS_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const SIZE_UNITS_BYTES: Record<string, number> = { '': 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 }

/** Parses `500ms`, `30s`, `5m`, `2h`, `1d` (a bare number is seconds) into milliseconds. */
export function parseDuration(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/i.exec(text)
  if (!match) throw new RangeError(`invalid duration: expected a number with a unit (500ms, 30s, 5m, 2h), got ${JSON.stringify(text)}`)
  const unit = (match[2] ?? 's').toLowerCase()
  return Math.round(Number(match[1]) * DURATION_UNITS_MS[unit]!)
}

/** Parses `64k`, `10M`, `1G`, `512` (bytes; binary multiples) into bytes. */
export function parseSize(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(text)
  if (!match) throw new RangeError(`invalid size: expected a number with an optional unit (64k, 10M, 1G), got ${JSON.stringify(text)}`)
  return Math.floor(Number(match[1]) * SIZE_UNITS_BYTES[match[2]!.toLowerCase()]!)
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes}B`
  const units = ['K', 'M', 'G', 'T']
  let value = bytes / 1024
  let index = 0
  while (value >= 1024 && index < units.length - 1) {
    value /= 1024
    index += 1
  }
  return `${value >= 10 ? Math.round(value) : value.toFixed(1)}${units[index]}`
}

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`
  const seconds = Math.floor(ms / 1000)
  if (seconds < 60) return ms % 1000 === 0 || seconds >= 10 ? `${seconds}s` : `${(Math.floor(ms / 100) / 10).toFixed(1)}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 60) return `${minutes}m${seconds % 60 ? `${seconds % 60}s` : ''}`
  const hours = Math.floor(minutes / 60)
  if (hours < 48) return `${hours}h${minutes % 60 ? `${minutes % 60}m` : ''}`
  return `${Math.floor(hours / 24)}d`
}
