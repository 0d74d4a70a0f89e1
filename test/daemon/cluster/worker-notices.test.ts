import { describe, expect, test } from 'vitest'
import pino from 'pino'
import { EventEmitter } from 'node:events'
import { RedisOutage } from '../../../daemon/cluster/redis-reconnect.js'
import { workerNotices, type RedisChange } from '../../../daemon/cluster/worker-notices.js'

/*
 * What a foreground worker tells its operator: the lines for each change of its link to Redis, and
 * which changes the outage log reports, once each however many of its connections see them.
 */

const identity = { redis: 'redis://:***@10.0.0.5:6379', name: 'w1', labels: { gpu: '1', zone: 'eu' }, queues: ['tend', 'tend~gpu=1'] }

function lines(format: 'text' | 'json', changes: RedisChange[]): string[] {
  const written: string[] = []
  const notice = workerNotices(identity, format, (line) => written.push(line))
  for (const change of changes) notice(change)
  return written
}

describe("what Redis answered is shown as text, never as a control sequence on the operator's terminal", () => {
  test('an error from a hostile or spoofed Redis server is printed with its control characters escaped', () => {
    const [line] = lines('text', [{ event: 'unreachable', code: 'ERR', error: 'ERR \u001b]0;PWNED\u0007\u001b[2Jfake' }])
    expect(line).toContain('ERR \\u001b]0;PWNED\\u0007\\u001b[2Jfake')
    expect(line).not.toMatch(/[\u0000-\u001f]/)
  })
})

/** A connection as the outage log watches one: its status and its events. */
class FakeConnection extends EventEmitter {
  status = 'connecting'
  ready(): void {
    this.status = 'ready'
    this.emit('ready')
  }
  fail(code = 'ECONNREFUSED'): void {
    this.status = 'reconnecting'
    this.emit('error', Object.assign(new Error(`connect ${code}`), { code, syscall: 'connect' }))
  }
}

/** An outage log of its own, and the changes it reported. */
function watched(): { outage: RedisOutage; changes: RedisChange[] } {
  const changes: RedisChange[] = []
  const outage = new RedisOutage({ shownUrl: identity.redis, log: pino({ level: 'silent' }), notice: (change) => changes.push(change) })
  return { outage, changes }
}

describe('worker notices', () => {
  test('text: where it is connected, as whom, with which labels and queues; then lost and back', () => {
    expect(lines('text', [{ event: 'connected' }, { event: 'lost', code: 'ECONNRESET', error: 'read ECONNRESET' }, { event: 'back' }])).toEqual([
      'tend worker: connected to redis://:***@10.0.0.5:6379 as w1 (labels gpu=1,zone=eu; queues tend, tend~gpu=1)',
      "tend worker: lost the cluster's Redis redis://:***@10.0.0.5:6379 (ECONNRESET: read ECONNRESET); its tasks run on, and it rejoins when Redis answers",
      "tend worker: the cluster's Redis redis://:***@10.0.0.5:6379 is back",
    ])
    expect(lines('text', [{ event: 'unreachable', code: 'ECONNREFUSED', error: 'x' }])[0]).toMatch(/is unreachable \(ECONNREFUSED: x\); serving local tasks/)
  })

  test('json: one document a line', () => {
    const [connected, lost] = lines('json', [{ event: 'connected' }, { event: 'lost', code: 'ECONNRESET', error: 'gone' }]).map((line) => JSON.parse(line))
    expect(connected).toEqual({ event: 'connected', redis: identity.redis, name: 'w1', labels: identity.labels, queues: identity.queues })
    expect(lost).toEqual({ event: 'lost', code: 'ECONNRESET', error: 'gone', redis: identity.redis })
  })

  test('the outage log says connected once, then each loss and return once, whatever the number of connections', () => {
    const { outage, changes } = watched()
    const [a, b] = [new FakeConnection(), new FakeConnection()]
    outage.watch(a)
    outage.watch(b)
    a.ready()
    b.ready()
    a.fail()
    b.fail()
    a.fail('ETIMEDOUT')
    a.ready()
    b.ready()
    outage.close()
    expect(changes.map((change) => change.event)).toEqual(['connected', 'lost', 'back'])
    expect(changes[1]).toMatchObject({ code: 'ECONNREFUSED' })
  })

  test('once closed (the worker leaving cuts its connections), a failure is no outage: nothing is said', () => {
    const { outage, changes } = watched()
    const connection = new FakeConnection()
    outage.watch(connection)
    connection.ready()
    outage.close()
    connection.fail()
    expect(changes.map((change) => change.event)).toEqual(['connected'])
  })

  test('a Redis never reached is said once, and its first answer is the connection', () => {
    const { outage, changes } = watched()
    const connection = new FakeConnection()
    outage.watch(connection)
    connection.fail()
    connection.fail()
    connection.ready()
    outage.close()
    expect(changes.map((change) => change.event)).toEqual(['unreachable', 'connected'])
  })
})
