import { InvalidArgumentError } from 'commander'
import { parseDuration, parseLabels, parseSize, TERMINAL_SIZE_MAX, type Labels } from '../../protocol/index.js'

/** commander parsers: a bad value becomes a usage error that names the flag and the value. */
export function durationOption(text: string): number {
  try {
    return parseDuration(text)
  } catch {
    throw new InvalidArgumentError(`expected a duration such as 500ms, 30s, 5m or 2h, got ${JSON.stringify(text)}`)
  }
}

export function sizeOption(text: string): number {
  try {
    return parseSize(text)
  } catch {
    throw new InvalidArgumentError(`expected a size such as 64k, 10M or 1G, got ${JSON.stringify(text)}`)
  }
}

export function countOption(text: string): number {
  if (!/^\d+$/.test(text)) throw new InvalidArgumentError(`expected a whole number, got ${JSON.stringify(text)}`)
  return Number(text)
}

/** A TCP port number, 1 to 65535 (`--ready-port`). */
export function tcpPortOption(text: string): number {
  if (!isPort(text)) throw new InvalidArgumentError(`expected a port from 1 to 65535, got ${JSON.stringify(text)}`)
  return Number(text)
}

function isPort(text: string): boolean {
  return /^\d+$/.test(text) && Number(text) >= 1 && Number(text) <= 65_535
}

/** `--port`: `auto` or a port number, 1 to 65535. */
export function portOption(text: string): number | 'auto' {
  if (text === 'auto') return 'auto'
  if (!isPort(text)) {
    throw new InvalidArgumentError(`expected auto or a port from 1 to 65535, got ${JSON.stringify(text)}`)
  }
  return Number(text)
}

/** A terminal's columns or rows: a whole number from 1 to TERMINAL_SIZE_MAX. */
export function terminalCellsOption(text: string): number {
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > TERMINAL_SIZE_MAX) {
    throw new InvalidArgumentError(`expected a whole number from 1 to ${TERMINAL_SIZE_MAX}, got ${JSON.stringify(text)}`)
  }
  return Number(text)
}

export function envOption(text: string, previous: Record<string, string> = {}): Record<string, string> {
  const match = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(text)
  if (!match) throw new InvalidArgumentError(`expected KEY=VALUE with a shell-style name, got ${JSON.stringify(text)}`)
  return { ...previous, [match[1]!]: match[2]! }
}

/** name=value pairs, comma-separated, repeatable: merged (a name given twice is an error). */
export function labelsOption(text: string, previous: Labels = {}): Labels {
  try {
    const labels = parseLabels(text)
    for (const name of Object.keys(labels)) if (name in previous) throw new Error(`label ${name} is given twice`)
    return { ...previous, ...labels }
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message)
  }
}
