import type { IncomingMessage, ServerResponse } from 'node:http'
import type { FastifyReply } from 'fastify'
import { type SpoolEvent, type TaskEvent } from '../../../protocol/index.js'
import { ErrorSchema, EventsHeaders, EventsQuery } from '../../../protocol/schemas.js'
import { requestOwner } from '../owner-scope.js'
import type { EventLog } from '../../store/event-log.js'
import { typedRoutes, type TendApp } from '../tend-app.js'

export interface EventsDeps {
  events: EventLog
  /** Aborted when the daemon stops: every stream is ended so the server can close. */
  closing: AbortSignal
}

const KEEPALIVE_MS = 15_000
/** How long a dropped subscriber gets to read its last bytes before its connection is cut. */
const DROP_FLUSH_MS = 30_000

/**
 * GET /v1/events — lifecycle events as Server-Sent Events. A subscriber that reconnects with the
 * last sequence number it saw (`since`, or the Last-Event-ID header) is replayed what it missed;
 * one whose sequence number is no longer covered gets 410 TEND_ERR_EVENTS_GAP. Everything is
 * checked before the stream opens, so every refusal is an ordinary JSON answer.
 */
export function registerEventsRoute(app: TendApp, deps: EventsDeps): void {
  const { events } = deps
  typedRoutes(app).get(
    '/v1/events',
    {
      schema: {
        summary: 'Subscribe to task lifecycle events (text/event-stream)',
        querystring: EventsQuery,
        headers: EventsHeaders,
        response: { 400: ErrorSchema, 410: ErrorSchema },
      },
    },
    async (request, reply) => {
      const { query, headers } = request
      const owner = requestOwner(request)
      // The header first: a browser's EventSource reconnects to the URL it was opened with (its
      // since=) and sends the last id it saw, which is the newer of the two.
      const since = headers['last-event-id'] ?? query.since ?? events.lastSeq
      // On the refusal too: a subscriber learns which daemon's numbering it is behind on.
      reply.header('x-tend-daemon-id', events.daemonId)
      events.assertCovers(since)
      // HEAD: the stream's head without the stream.
      if (request.method === 'HEAD') return (reply as FastifyReply).status(200).type('text/event-stream').header('cache-control', 'no-cache').send()
      reply.hijack()
      streamEvents(request.raw, reply.raw, deps, owner, since, query.spool === true)
      return reply
    },
  )
}

/**
 * Writes the events after `since` to one subscriber, then each new one, at the pace its socket
 * takes them: the next event is written only once the socket has taken the previous ones (at most
 * one event past its high-water mark waits in the daemon). The kept window is the backlog, shared
 * by every subscriber; a subscriber so slow that the window passes it is dropped with a final
 * comment line, and reconnecting with Last-Event-ID then tells it of the gap.
 */
function streamEvents(
  req: IncomingMessage,
  raw: ServerResponse,
  { events: log, closing }: EventsDeps,
  owner: string | null,
  since: number,
  spool: boolean,
): void {
  let cursor = since
  let blocked = false
  let finished = false
  raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-tend-daemon-id': log.daemonId })
  // An id without data sets a browser's last event id without an event: one that reconnects
  // before any event came resumes from here, not from whatever is the daemon's newest then.
  blocked = !raw.write(`: tend events from ${since}\n\nid: ${since}\n\n`)
  // Spool events, for a subscriber that asked: rare (one per change), so written as they come.
  const unwritable = spool ? log.spoolUnwritable : null
  if (unwritable) blocked = !raw.write(formatSpoolEvent(unwritable))
  const unsubscribeSpool = spool ? log.subscribeSpool((event) => (blocked = !raw.write(formatSpoolEvent(event)) || blocked)) : () => false

  const pump = () => {
    if (finished) return
    if (!log.covers(cursor)) return drop()
    while (!blocked) {
      const event = log.after(cursor)
      if (event === undefined) return
      cursor = event.seq
      if (owner === null || event.owner === owner) blocked = !raw.write(formatEvent(event))
    }
  }
  const drop = () => {
    finish()
    raw.end(
      `: dropped: this subscriber fell more than the kept window behind (at seq ${cursor}, the daemon at ${log.lastSeq}); reconnect with Last-Event-ID\n\n`,
    )
    // A reader that never reads again must not hold the connection forever.
    setTimeout(() => raw.destroy(), DROP_FLUSH_MS).unref()
  }
  const finish = () => {
    if (finished) return
    finished = true
    clearInterval(keepalive)
    unsubscribe()
    unsubscribeSpool()
    closing.removeEventListener('abort', close)
  }
  const close = () => {
    finish()
    raw.end()
  }

  const unsubscribe = log.subscribe(pump)
  const keepalive = setInterval(() => {
    if (!blocked) blocked = !raw.write(': keepalive\n\n')
  }, KEEPALIVE_MS)
  raw.on('drain', () => {
    blocked = false
    pump()
  })
  req.once('close', close)
  raw.once('close', close)
  closing.addEventListener('abort', close, { once: true })
  pump()
}

/** Named, without an id: it takes no sequence number and moves no subscriber's Last-Event-ID. */
function formatSpoolEvent(event: SpoolEvent): string {
  return `event: spool\ndata: ${JSON.stringify(event)}\n\n`
}

function formatEvent(event: TaskEvent): string {
  return `id: ${event.seq}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`
}
