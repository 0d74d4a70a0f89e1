import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { join } from 'node:path'
import { FIXTURES } from './test-daemon.js'
import { waitFor } from './wait-for.js'

export interface Notification {
  /** The sender's pid, as the kernel gave it (SCM_CREDENTIALS). */
  pid: number
  message: string
}

export interface NotifyListener {
  /** Every datagram so far, in order. */
  received: Notification[]
  /** Called with each datagram as it arrives, before it is added to `received`. */
  onMessage: (handler: (notification: Notification) => void | Promise<void>) => void
  /** Waits for a datagram whose text has the line `line` (e.g. READY=1). */
  next: (line: string, timeoutMs?: number) => Promise<Notification>
  close: () => Promise<void>
}

/**
 * systemd's notification socket, played by test/fixtures/notify-listener.py: a unix datagram
 * socket (Node has none) at `address`, a path or "@name" for an abstract one.
 */
export async function startNotifyListener(address: string): Promise<NotifyListener> {
  const child = spawn('python3', [join(FIXTURES, 'notify-listener.py'), address], { stdio: ['pipe', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const received: Notification[] = []
  let listening = false
  let handler: (notification: Notification) => void | Promise<void> = () => {}
  let handled = Promise.resolve()
  createInterface({ input: child.stdout }).on('line', (line) => {
    if (line === 'listening') listening = true
    else {
      const notification = JSON.parse(line) as Notification
      handled = handled.then(async () => {
        await handler(notification)
        received.push(notification)
      })
    }
  })
  await waitFor(`the notify listener on ${address} (its stderr: ${stderr})`, () => {
    if (child.exitCode !== null) throw new Error(`notify-listener.py exited with ${child.exitCode}: ${stderr}`)
    return listening
  })
  return {
    received,
    onMessage: (next) => (handler = next),
    next: (line, timeoutMs = 30_000) =>
      waitFor(
        `${line} on ${address} (received: ${JSON.stringify(received)})`,
        () => received.find((notification) => notification.message.split('\n').includes(line)),
        timeoutMs,
      ),
    close: async () => {
      child.stdin.end()
      await exited
    },
  }
}
