import { request as httpRequest } from 'node:http'
import { createParser } from 'eventsource-parser'
import { TendError, type TaskEvent } from '../protocol/index.js'

export interface EventsOptions {
  /** Replay events after this sequence number (default: only new ones). */
  since?: number
  signal?: AbortSignal
  /** Extra request headers (the client's owner scope). */
  headers?: Record<string, string>
}

/**
 * Lifecycle events as an async iterator over the daemon's SSE stream. When the stream drops, it
 * reconnects with the last sequence number it saw, so nothing in between is missed; a new daemon
 * (its id changed) is read from its first event.
 */
export async function* streamEvents(socketPath: string, options: EventsOptions = {}): AsyncGenerator<TaskEvent> {
  let since = options.since
  let daemonId: string | undefined
  while (!options.signal?.aborted) {
    const queue: TaskEvent[] = []
    let wake: (() => void) | undefined
    let ended = false
    let failure: unknown
    const parser = createParser({
      onEvent: (message) => {
        queue.push(JSON.parse(message.data) as TaskEvent)
        wake?.()
      },
    })
    const path = since === undefined ? '/v1/events' : `/v1/events?since=${since}`
    const req = httpRequest({ socketPath, path, method: 'GET', signal: options.signal, headers: { ...options.headers, accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) {
        failure = new TendError('TEND_ERR_PROTOCOL', { detail: `events answered ${res.statusCode}` })
        ended = true
        wake?.()
        res.resume()
        return
      }
      res.setEncoding('utf8')
      res.on('data', (text: string) => parser.feed(text))
      res.on('end', () => {
        ended = true
        wake?.()
      })
      res.on('error', () => {
        ended = true
        wake?.()
      })
    })
    req.on('error', (error) => {
      failure = error
      ended = true
      wake?.()
    })
    req.end()
    try {
      for (;;) {
        while (queue.length > 0) {
          const event = queue.shift()!
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
    if (failure) throw failure instanceof TendError ? failure : new TendError('TEND_ERR_DAEMON_UNAVAILABLE', { detail: (failure as Error).message }, { cause: failure })
  }
}
