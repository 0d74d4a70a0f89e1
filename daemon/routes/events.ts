import type { TendApp } from '../server.js'
import type { DaemonContext } from '../context.js'
import { EventsQuery, type TaskEvent } from '../../protocol/index.js'
import { requestOwner } from '../owner-scope.js'

const KEEPALIVE_MS = 15_000

/**
 * GET /v1/events — lifecycle events as Server-Sent Events. A subscriber that reconnects with the
 * last sequence number it saw (`since`, or the Last-Event-ID header) is replayed what it missed.
 */
export function registerEventsRoute(app: TendApp, context: DaemonContext): void {
  app.get('/v1/events', { schema: { summary: 'Subscribe to task lifecycle events (text/event-stream)', querystring: EventsQuery } }, (request, reply) => {
    const query = request.query as EventsQuery
    const lastEventId = Number(request.headers['last-event-id'])
    const since = query.since ?? (Number.isInteger(lastEventId) ? lastEventId : context.events.lastSeq)
    reply.hijack()
    const raw = reply.raw
    raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-tend-daemon-id': context.events.daemonId })
    const owner = requestOwner(request)
    const send = (event: TaskEvent) => {
      if (owner === null || event.owner === owner) raw.write(`id: ${event.seq}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`)
    }
    raw.write(`: tend events from ${since}\n\n`)
    for (const event of context.events.since(since)) send(event)
    const unsubscribe = context.events.subscribe(send)
    const keepalive = setInterval(() => raw.write(': keepalive\n\n'), KEEPALIVE_MS)
    const end = () => {
      clearInterval(keepalive)
      unsubscribe()
      context.closing.removeEventListener('abort', end)
      raw.end()
    }
    request.raw.once('close', end)
    context.closing.addEventListener('abort', end, { once: true })
  })
}
