import type { IncomingMessage } from 'node:http'
import { createParser } from 'eventsource-parser'
import { TendError, type SpoolEvent, type TaskEvent, type WireError } from '../protocol/index.js'
import type { DaemonEndpoint } from './endpoint.js'

export interface EventsOptions {
  /** Replay events after this sequence number (default: only new ones). */
  since?: number
  signal?: AbortSignal
  /** Extra request headers (the client's owner scope). */
  headers?: Record<string, string>
  /** Asks for spool events too (the stream's `spool=true`): each is passed here, never yielded as a task event. */
  onSpool?: (event: SpoolEvent) => void
}

/** Events parsed but not yet taken by the consumer before the stream is paused (backpressure). */
const QUEUE_HIGH_WATER = 256

/**
 * Lifecycle events as an async iterator over the daemon's SSE stream. When the stream drops, it
 * reconnects with the last sequence number it saw, so nothing in between is missed; a new daemon
 * (its id changed) is read from its first event. A slow consumer slows the stream down instead of
 * queueing without bound.
 *
 * Throws TEND_ERR_EVENTS_GAP when the daemon no longer keeps every event after the sequence number
 * asked for (it keeps a window of the latest ones): events were lost to this subscriber, so its
 * view must be rebuilt (list the tasks, then follow from the daemon's `events.lastSeq`).
 */
export async function* streamEvents(endpoint: DaemonEndpoint, options: EventsOptions = {}): AsyncGenerator<TaskEvent> {
  let since = options.since
  let daemonId: string | undefined
  while (!options.signal?.aborted) {
    const queue: TaskEvent[] = []
    let wake: (() => void) | undefined
    let ended = false
    let failure: unknown
    let response: IncomingMessage | undefined
    let otherDaemon = false
    const stop = (error?: unknown) => {
      failure ??= error
      ended = true
      wake?.()
    }
    const parser = createParser({
      onEvent: (message) => {
        if (message.event === 'spool') return options.onSpool?.(JSON.parse(message.data) as SpoolEvent)
        queue.push(JSON.parse(message.data) as TaskEvent)
        if (queue.length >= QUEUE_HIGH_WATER) response?.pause()
        wake?.()
      },
    })
    const query = [since === undefined ? null : `since=${since}`, options.onSpool ? 'spool=true' : null].filter((part) => part !== null)
    const path = query.length === 0 ? '/v1/events' : `/v1/events?${query.join('&')}`
    const req = endpoint.request({ path, method: 'GET', signal: options.signal, headers: { ...options.headers, accept: 'text/event-stream' } }, (res) => {
      response = res
      const answeredBy = res.headers['x-tend-daemon-id']
      if (daemonId !== undefined && typeof answeredBy === 'string' && answeredBy !== daemonId && since !== undefined) {
        // The sequence number is the previous daemon's: read the new one from its first event.
        otherDaemon = true
        res.resume()
        return stop()
      }
      if (res.statusCode !== 200) return readError(res, stop)
      res.setEncoding('utf8')
      res.on('data', (text: string) => parser.feed(text))
      res.on('end', () => stop())
      res.on('error', () => stop())
    })
    req.on('error', (error) => stop(error))
    req.end()
    try {
      for (;;) {
        while (queue.length > 0) {
          const event = queue.shift()!
          if (queue.length < QUEUE_HIGH_WATER / 2) response?.resume()
          if (daemonId !== undefined && event.daemonId !== daemonId) since = undefined
          daemonId = event.daemonId
          since = event.seq
          yield event
        }
        if (ended) break
        await new Promise<void>((resolve) => (wake = resolve))
        wake = undefined
      }
    } finally {
      req.destroy()
    }
    if (options.signal?.aborted) return
    if (otherDaemon) {
      since = 0
      daemonId = undefined
      continue
    }
    if (failure)
      throw failure instanceof TendError ? failure : new TendError('TEND_ERR_DAEMON_UNAVAILABLE', { detail: (failure as Error).message }, { cause: failure })
  }
}

/** A refusal (a gap, a bad request) is the daemon's JSON error: rebuilt as the typed error it names. */
function readError(res: IncomingMessage, stop: (error: unknown) => void): void {
  let text = ''
  res.setEncoding('utf8')
  res.on('data', (chunk: string) => (text += chunk))
  res.on('error', () => stop(new TendError('TEND_ERR_PROTOCOL', { detail: `events answered ${res.statusCode}` })))
  res.on('end', () => {
    try {
      stop(TendError.fromWire(JSON.parse(text) as Partial<WireError>))
    } catch {
      stop(new TendError('TEND_ERR_PROTOCOL', { detail: `events answered ${res.statusCode}: ${text.slice(0, 200)}` }))
    }
  })
}
