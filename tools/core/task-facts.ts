import type { TaskPort } from '../../protocol/ports.js'
import type { Readiness } from '../../protocol/readiness.js'

/**
 * What a model needs to know of a running server beside its state, as bracketed notes: where it
 * listens (`[listening: 127.0.0.1:8000, udp 0.0.0.0:5353]`) and its readiness (`[ready]`, `[not
 * ready yet]`, `[never ready: timed out]`). None for a task that listens nowhere and has no
 * readiness condition.
 */
export function serverNotes(facts: { ports?: readonly TaskPort[] | undefined; ready?: Readiness | undefined }): string[] {
  const notes: string[] = []
  if (facts.ports && facts.ports.length > 0) notes.push(`[listening: ${facts.ports.map(portText).join(', ')}]`)
  const readiness = readinessText(facts.ready)
  if (readiness) notes.push(`[${readiness}]`)
  return notes
}

/** `127.0.0.1:8000` for TCP, `udp 0.0.0.0:5353` for UDP; an IPv6 address in brackets. */
export function portText(port: TaskPort): string {
  const address = port.address.includes(':') ? `[${port.address}]` : port.address
  return `${port.proto === 'udp' ? 'udp ' : ''}${address}:${port.port}`
}

function readinessText(ready: Readiness | undefined): string | null {
  if (ready === undefined) return null
  if (ready === null) return 'not ready yet'
  if ('failed' in ready) return `never ready: ${ready.failed}`
  return 'ready'
}
