import { afterEach, expect, test } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import { createServiceNotifier, loadServiceNotify } from '../../../daemon/service/service-notify.js'
import { startNotifyListener, type NotifyListener } from '../../helpers/notify-listener.js'

const folders: string[] = []
const listeners: NotifyListener[] = []
afterEach(async () => {
  for (const listener of listeners.splice(0)) await listener.close()
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
})

function socketPath(): string {
  const folder = mkdtempSync(join(tmpdir(), 'tend-test-notify-'))
  folders.push(folder)
  return join(folder, 'notify.sock')
}

async function listen(address: string): Promise<NotifyListener> {
  const listener = await startNotifyListener(address)
  listeners.push(listener)
  return listener
}

function notifyPart(): { send: (address: string, message: string) => void } {
  const loaded = loadServiceNotify()
  if ('reason' in loaded) throw new Error(`the service-notify addon is needed here: ${loaded.reason}`)
  return loaded
}

test('a notification reaches a socket at a path as one datagram, sent by this process', async () => {
  const address = socketPath()
  const listener = await listen(address)
  notifyPart().send(address, 'READY=1\nSTATUS=listening')
  const received = await listener.next('READY=1')
  expect(received).toEqual({ pid: process.pid, message: 'READY=1\nSTATUS=listening' })
})

test('an address that starts with @ is an abstract socket', async () => {
  const address = `@tend-test-notify-${process.pid}-${Date.now()}`
  const listener = await listen(address)
  notifyPart().send(address, 'STOPPING=1')
  expect((await listener.next('STOPPING=1')).pid).toBe(process.pid)
})

test('a socket nobody listens on is an error naming the address and the reason', () => {
  const address = socketPath()
  expect(() => notifyPart().send(address, 'READY=1')).toThrow(new RegExp(`${address}.*No such file`))
})

test('an address neither absolute nor abstract, or too long for a socket, is refused naming it', () => {
  expect(() => notifyPart().send('relative/notify.sock', 'READY=1')).toThrow(/relative\/notify\.sock.*absolute path or an abstract/)
  const long = `/${'x'.repeat(200)}`
  expect(() => notifyPart().send(long, 'READY=1')).toThrow(/longer than a unix socket address/)
})

test('the notifier sends READY=1 and STOPPING=1, and without an address does nothing', async () => {
  const address = socketPath()
  const listener = await listen(address)
  const log = pino({ level: 'silent' })
  const notifier = createServiceNotifier(address, log)
  notifier.ready('listening on /run/tend.sock')
  notifier.stopping()
  await listener.next('STOPPING=1')
  expect(listener.received.map((notification) => notification.message)).toEqual(['READY=1\nSTATUS=listening on /run/tend.sock', 'STOPPING=1'])
  const silent = createServiceNotifier(null, log)
  expect(() => {
    silent.ready('x')
    silent.stopping()
  }).not.toThrow()
})

test('a notifier whose socket is gone logs a warning and never throws', () => {
  const warnings: string[] = []
  const log = pino({ level: 'warn' }, { write: (line: string) => warnings.push(line) })
  const notifier = createServiceNotifier(socketPath(), log)
  expect(() => notifier.ready('x')).not.toThrow()
  expect(warnings.join('')).toContain('service manager not notified')
})

test('without the addon the notifier says why once, and does nothing', () => {
  const warnings: string[] = []
  const log = pino({ level: 'warn' }, { write: (line: string) => warnings.push(line) })
  const notifier = createServiceNotifier(socketPath(), log, join(tmpdir(), 'no-such-addon.node'))
  notifier.ready('x')
  notifier.stopping()
  expect(warnings).toHaveLength(1)
  expect(warnings[0]).toContain('service-notify addon')
})
