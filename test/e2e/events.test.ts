import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { readdirSync, readlinkSync, writeFileSync } from 'node:fs'
import { request, type ClientRequest } from 'node:http'
import { join } from 'node:path'
import type { TaskEvent, TendClient } from '../../client/index.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

let daemon: TestDaemon

beforeAll(async () => {
  daemon = await startTestDaemon()
})
afterAll(async () => {
  await daemon?.stop()
})

/** Sockets this test process holds open (keep-alive connections, event streams). */
function openSockets(): number {
  let count = 0
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith('socket:')) count += 1
    } catch {
      // closed while we looked
    }
  }
  return count
}

/**
 * Reads `client.events(...)` until `done(events)` holds, then leaves the loop (which closes the
 * iterator). An AbortController ends the iteration if the condition never comes, and the failure
 * names what was awaited and what arrived.
 */
async function collectEvents(
  client: TendClient,
  options: { since?: number },
  what: string,
  done: (events: TaskEvent[]) => boolean,
  timeoutMs = 10_000,
): Promise<TaskEvent[]> {
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(), timeoutMs)
  const events: TaskEvent[] = []
  try {
    for await (const event of client.events({ ...options, signal: controller.signal })) {
      events.push(event)
      if (done(events)) break
    }
  } finally {
    clearTimeout(timer)
  }
  if (!done(events)) {
    throw new Error(
      `timed out after ${timeoutMs}ms waiting for ${what}; got ${events.map((event) => `${event.seq}:${event.type}:${event.taskId}`).join(', ') || 'no events'}`,
    )
  }
  return events
}

const summary = (events: TaskEvent[]) => events.map((event) => [event.type, event.taskId])
const exitedFor = (ids: string[]) => (events: TaskEvent[]) => ids.every((id) => events.some((event) => event.taskId === id && event.type === 'task.exited'))

describe('events', () => {
  test('starting a task yields task.queued, task.started and task.exited for it, with increasing seq', async () => {
    const client = daemon.newClient()
    const started = await client.start({ command: ['echo', 'evented'] })
    const events = await collectEvents(client, { since: 0 }, `task.exited of ${started.id}`, exitedFor([started.id]))
    const mine = events.filter((event) => event.taskId === started.id)
    expect(mine.map((event) => event.type)).toEqual(['task.queued', 'task.started', 'task.exited'])
    for (let index = 1; index < mine.length; index += 1) expect(mine[index]!.seq).toBeGreaterThan(mine[index - 1]!.seq)
    const daemonIds = new Set(events.map((event) => event.daemonId))
    expect(daemonIds.size).toBe(1)
    expect(mine[2]!.task).toMatchObject({ id: started.id, state: 'exited', exitCode: 0 })
    expect(mine[0]!.owner).toBe('operator')
    client.close()
  })

  test('a subscriber that reconnects with its last seq gets exactly the events it missed, once each', async () => {
    const client = daemon.newClient()
    const first = await client.start({ command: ['true'] })
    const before = await collectEvents(client, { since: 0 }, `task.exited of ${first.id}`, exitedFor([first.id]))
    const lastSeen = before.at(-1)!.seq

    // While nobody listens: two more tasks come and go.
    const missedIds: string[] = []
    for (const command of [
      ['echo', 'missed one'],
      ['echo', 'missed two'],
    ]) {
      const task = await client.start({ command })
      missedIds.push(task.id)
      await client.wait(task.id)
    }
    // A task started after the reconnect point marks where the missed events end.
    const marker = await client.start({ command: ['true'] })
    await client.wait(marker.id)

    const replayed = await collectEvents(client, { since: lastSeen }, `task.exited of marker ${marker.id}`, exitedFor([marker.id]))
    const missed = replayed.filter((event) => event.taskId !== marker.id)
    expect(missed.map((event) => event.seq)).toEqual(Array.from({ length: 6 }, (_, index) => lastSeen + 1 + index))
    expect(summary(missed)).toEqual([
      ['task.queued', missedIds[0]],
      ['task.started', missedIds[0]],
      ['task.exited', missedIds[0]],
      ['task.queued', missedIds[1]],
      ['task.started', missedIds[1]],
      ['task.exited', missedIds[1]],
    ])
    expect(summary(replayed.filter((event) => event.taskId === marker.id))).toEqual([
      ['task.queued', marker.id],
      ['task.started', marker.id],
      ['task.exited', marker.id],
    ])
    expect(replayed.every((event) => event.seq > lastSeen)).toBe(true)
    client.close()
  })

  test('an open stream delivers an event that happens after it connected', async () => {
    const client = daemon.newClient()
    const gate = join(daemon.home, 'live-gate')
    const task = await client.start({ command: `while [ ! -e '${gate}' ]; do sleep 0.02; done; echo through`, shell: true })
    const controller = new AbortController()
    const iterator = client.events({ since: 0, signal: controller.signal })[Symbol.asyncIterator]()
    const timer = setTimeout(() => controller.abort(), 10_000)
    const seen: TaskEvent[] = []
    const pullUntil = async (type: string) => {
      while (!seen.some((event) => event.taskId === task.id && event.type === type)) {
        const next = await iterator.next()
        if (next.done) throw new Error(`the stream ended before ${type} of ${task.id}; got ${seen.map((event) => event.type).join(', ')}`)
        seen.push(next.value)
      }
    }
    try {
      await pullUntil('task.started')
      // The task cannot end before the gate exists, so its exit reaches an already open stream.
      writeFileSync(gate, '')
      await pullUntil('task.exited')
      expect(seen.filter((event) => event.taskId === task.id).map((event) => event.type)).toEqual(['task.queued', 'task.started', 'task.exited'])
    } finally {
      clearTimeout(timer)
      await iterator.return?.(undefined)
      client.close()
    }
  })

  test('closing the iterator and the client leaves no socket open', async () => {
    const baseline = openSockets()
    const client = daemon.newClient()
    const started = await client.start({ command: ['true'] })
    await collectEvents(client, { since: 0 }, `task.exited of ${started.id}`, exitedFor([started.id]))
    client.close()
    await waitFor(`open sockets back to ${baseline} (now ${openSockets()})`, () => openSockets() <= baseline)
  })

  test('aborting its signal ends the iteration without an error and closes the stream', async () => {
    const baseline = openSockets()
    const client = daemon.newClient()
    const started = await client.start({ command: ['true'] })
    const controller = new AbortController()
    const seen: TaskEvent[] = []
    const iteration = (async () => {
      for await (const event of client.events({ since: 0, signal: controller.signal })) {
        seen.push(event)
        if (exitedFor([started.id])(seen)) controller.abort()
      }
    })()
    await expect(iteration).resolves.toBeUndefined()
    expect(exitedFor([started.id])(seen)).toBe(true)
    client.close()
    await waitFor(`open sockets back to ${baseline} (now ${openSockets()})`, () => openSockets() <= baseline)
  })

  test('raw SSE with a Last-Event-ID header replays what came after it', async () => {
    const task = await daemon.client.start({ command: ['echo', 'raw'] })
    await daemon.client.wait(task.id)
    const all = await collectEvents(daemon.client, { since: 0 }, `task.exited of ${task.id}`, exitedFor([task.id]))
    const queued = all.find((event) => event.taskId === task.id && event.type === 'task.queued')!

    let text = ''
    let contentType: string | undefined
    let daemonIdHeader: string | undefined
    let req: ClientRequest | undefined
    try {
      await new Promise<void>((resolve, reject) => {
        req = request(
          {
            socketPath: join(daemon.home, 'tend.sock'),
            path: '/v1/events',
            method: 'GET',
            agent: false,
            headers: { accept: 'text/event-stream', 'last-event-id': String(queued.seq) },
          },
          (res) => {
            contentType = res.headers['content-type']
            daemonIdHeader = res.headers['x-tend-daemon-id'] as string | undefined
            res.setEncoding('utf8')
            res.on('data', (chunk: string) => {
              text += chunk
              if (text.includes(`"type":"task.exited","at"`) && text.includes(`id: ${queued.seq + 2}\n`)) resolve()
            })
            res.on('end', () => reject(new Error(`stream ended early: ${text}`)))
          },
        )
        req.on('error', reject)
        req.end()
        setTimeout(() => reject(new Error(`timed out waiting for the replay after Last-Event-ID ${queued.seq}; got ${JSON.stringify(text)}`)), 10_000).unref()
      })
    } finally {
      req?.destroy()
    }
    expect(contentType).toMatch(/^text\/event-stream/)
    expect(daemonIdHeader).toBe(queued.daemonId)
    const messages = text
      .split('\n\n')
      .filter((block) => block.includes('data: '))
      .map((block) => {
        const fields = Object.fromEntries(
          block
            .split('\n')
            .filter((line) => !line.startsWith(':'))
            .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)]),
        )
        return { id: Number(fields.id), event: fields.event, data: JSON.parse(fields.data!) as TaskEvent }
      })
    expect(messages[0]!.id).toBe(queued.seq + 1)
    const forTask = messages.filter((message) => message.data.taskId === task.id)
    expect(forTask.map((message) => [message.id, message.event])).toEqual([
      [queued.seq + 1, 'task.started'],
      [queued.seq + 2, 'task.exited'],
    ])
    for (const message of messages) expect(message.data.seq).toBe(message.id)
  })

  test('a browser reconnecting with Last-Event-ID resumes there, though the URL it reuses says since=', async () => {
    // EventSource reconnects to the URL it was opened with and adds the last id it saw.
    const task = await daemon.client.start({ command: ['echo', 'reconnect'] })
    await daemon.client.wait(task.id)
    const all = await collectEvents(daemon.client, { since: 0 }, `task.exited of ${task.id}`, exitedFor([task.id]))
    const queued = all.find((event) => event.taskId === task.id && event.type === 'task.queued')!
    const text = await rawStream(`/v1/events?since=0`, { 'last-event-id': String(queued.seq) }, (sofar) => sofar.includes(`id: ${queued.seq + 2}\n`))
    const ids = [...text.matchAll(/^id: (\d+)\nevent: /gm)].map((match) => Number(match[1]))
    expect(ids[0]).toBe(queued.seq + 1)
  })

  test('a stream says where it starts (id:) before any event, so a browser that reconnects before one came misses nothing', async () => {
    const { events } = await daemon.client.status()
    const text = await rawStream('/v1/events', {}, (sofar) => sofar.includes('\n\n', sofar.indexOf('\n\n') + 2))
    // A block with an id and no data sets the browser's last event id without an event.
    expect(text).toMatch(new RegExp(`^: tend events from ${events.lastSeq}\n\nid: ${events.lastSeq}\n\n`))
  })
})

/** The raw event stream's text until `enough(text)`; fails naming what it got after 10 s. */
async function rawStream(path: string, headers: Record<string, string>, enough: (text: string) => boolean): Promise<string> {
  let text = ''
  let req: ClientRequest | undefined
  try {
    await new Promise<void>((resolve, reject) => {
      req = request(
        { socketPath: join(daemon.home, 'tend.sock'), path, method: 'GET', agent: false, headers: { accept: 'text/event-stream', ...headers } },
        (res) => {
          res.setEncoding('utf8')
          res.on('data', (chunk: string) => {
            text += chunk
            if (enough(text)) resolve()
          })
          res.on('end', () => reject(new Error(`stream ended early: ${text}`)))
        },
      )
      req.on('error', reject)
      req.end()
      setTimeout(() => reject(new Error(`timed out reading ${path}; got ${JSON.stringify(text)}`)), 10_000).unref()
    })
  } finally {
    req?.destroy()
  }
  return text
}
