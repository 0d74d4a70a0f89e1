import { afterEach, expect, test } from 'vitest'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { socketAnswers } from '../../client/ensure-daemon.js'
import { startNotifyListener, type NotifyListener } from '../helpers/notify-listener.js'
import { TendClient } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { assertNothingLeft, createTempHome, daemonEnv, startTestDaemon } from '../helpers/test-daemon.js'

// A daemon run by systemd as Type=notify (docs/service.md): systemd takes it as started at
// READY=1 and hears only its main process (NotifyAccess=main).

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!()
})

async function listener(): Promise<{ address: string; listener: NotifyListener }> {
  const folder = mkdtempSync(join(tmpdir(), 'tend-test-notify-'))
  cleanups.push(() => rmSync(folder, { recursive: true, force: true }))
  const address = join(folder, 'notify.sock')
  const started = await startNotifyListener(address)
  cleanups.push(() => started.close())
  return { address, listener: started }
}

test('a daemon with NOTIFY_SOCKET sends READY=1 from its own pid once its socket answers, and STOPPING=1 when it stops', async () => {
  const { address, listener: notifications } = await listener()
  const home = createTempHome()
  const socket = join(home, 'tend.sock')
  const answeredAtReady: boolean[] = []
  notifications.onMessage(async ({ message }) => {
    if (message.split('\n').includes('READY=1')) answeredAtReady.push(await socketAnswers(socket))
  })
  const daemon = await startTestDaemon({ home, env: { NOTIFY_SOCKET: address } })
  let stopped = false
  cleanups.push(() => (stopped ? undefined : daemon.stop()))
  const ready = await notifications.next('READY=1')
  expect(ready.pid).toBe(daemon.process.pid)
  expect(answeredAtReady).toEqual([true])
  expect(notifications.received.some(({ message }) => message.includes('STOPPING=1'))).toBe(false)

  await daemon.stop()
  stopped = true
  const stopping = await notifications.next('STOPPING=1')
  expect(stopping.pid).toBe(daemon.process.pid)
  expect(notifications.received.map(({ message }) => message.split('\n')[0])).toEqual(['READY=1', 'STOPPING=1'])
})

test("a task does not get the daemon's NOTIFY_SOCKET", async () => {
  const { address } = await listener()
  const daemon = await startTestDaemon({ env: { NOTIFY_SOCKET: address } })
  cleanups.push(() => daemon.stop())
  const task = await daemon.client.start({ command: ['sh', '-c', 'echo "${NOTIFY_SOCKET-unset}"'] })
  await daemon.client.wait(task.id)
  expect((await daemon.client.read(task.id)).data).toBe('unset\n')
})

test('a daemon whose NOTIFY_SOCKET nobody listens on starts all the same', async () => {
  const folder = mkdtempSync(join(tmpdir(), 'tend-test-notify-'))
  cleanups.push(() => rmSync(folder, { recursive: true, force: true }))
  const daemon = await startTestDaemon({ env: { NOTIFY_SOCKET: join(folder, 'nobody.sock') } })
  cleanups.push(() => daemon.stop())
  expect((await daemon.client.status()).pid).toBe(daemon.process.pid)
})

test("a daemon a client starts in the background does not get the client's NOTIFY_SOCKET: it is not the service's main process", async () => {
  const { address, listener: notifications } = await listener()
  const home = createTempHome()
  const env = daemonEnv(home, { NOTIFY_SOCKET: address })
  const client = new TendClient({ env })
  cleanups.push(async () => {
    client.close()
    await runCli(['stop'], env)
    await assertNothingLeft(home)
    rmSync(home, { recursive: true, force: true })
  })
  const { pid } = await client.status()
  expect(readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')).not.toContainEqual(expect.stringMatching(/^NOTIFY_SOCKET=/))
  expect(notifications.received).toEqual([])
})
