import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { chmodSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { CONNECTIONS_PER_NAMESPACE } from '../../daemon/network/egress-service.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * A task that floods tend's side of its namespace (DNS queries from thousands of sockets,
 * thousands of connections held open to the proxy) slows its own owner at most: the daemon keeps
 * answering, another owner's task runs, and what the daemon holds for the task stays bounded.
 */

const base = mkdtempSync('/var/tmp/tend-egress-flood-')
chmodSync(base, 0o711)
const q = (text: string) => `'${text.replaceAll("'", "'\\''")}'`
let daemon: TestDaemon
let cwd: string

beforeAll(async () => {
  daemon = await startTestDaemon({ env: { TEND_SANDBOX: 'workspace', TEND_NETWORK_ALLOW: '*.up.test' } })
  cwd = mkdtempSync(join(base, 'ws-'))
  chmodSync(cwd, 0o777)
})
afterAll(async () => {
  await daemon?.stop()
  rmSync(base, { recursive: true, force: true })
})

/** Starts a flooding task and waits for its line saying the flood is on. */
async function flood(program: string, owner: string) {
  const task = await daemon.client.start({ command: `exec python3 -u -c ${q(program)}`, shell: true, cwd, owner, network: 'allow', timeoutMs: 120_000 })
  await waitFor(
    `the flood of ${task.id} to start`,
    async () => {
      const current = await daemon.client.get(task.id)
      if (current.state !== 'running' && current.state !== 'queued') throw new Error(`the flood ended: ${(await daemon.client.read(task.id)).data}`)
      return (await daemon.client.read(task.id)).data.includes('flooding')
    },
    30_000,
  )
  return task
}

/** Another owner's task runs to its end while the flood goes on. */
async function anotherOwnerRuns(): Promise<void> {
  const started = await daemon.client.start({ command: 'echo still-served', shell: true, cwd, owner: 'bystander' })
  // A bystander's echo takes well under a second; under the unbounded flood it took 16 s.
  const ended = await daemon.client.wait(started.id, { timeoutMs: 5_000 })
  expect(ended).toMatchObject({ state: 'exited', exitCode: 0 })
  expect((await daemon.client.read(started.id)).data).toBe('still-served\n')
}

function descriptorsOf(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length
}

describe('a flooding task', () => {
  test('DNS queries from thousands of sockets, as fast as it can: the daemon answers, another owner runs', async () => {
    const program = [
      'import socket, struct, random',
      'held = []',
      // Thousands of sockets in the namespace make its socket table long.
      'for i in range(3000):',
      '    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); held.append(s)',
      'def query(name):',
      '    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split("."))',
      '    return struct.pack(">HHHHHH", random.randrange(65536), 0x0100, 1, 0, 0, 0) + labels + b"\\x00\\x00\\x01\\x00\\x01"',
      'print("flooding", flush=True)',
      'i = 0',
      'while True:',
      '    i += 1',
      '    held[i % len(held)].sendto(query("n%d.evil.example" % i), ("127.0.0.1", 53))',
    ].join('\n')
    const task = await flood(program, 'flooder')
    const status = await daemon.client.status()
    expect(status.pid).toBeGreaterThan(0)
    await anotherOwnerRuns()
    await daemon.client.kill(task.id)
  })

  test(`connections held open to the proxy: the daemon holds at most ${CONNECTIONS_PER_NAMESPACE} of them, and answers`, async () => {
    const pid = (await daemon.client.status()).pid
    const before = descriptorsOf(pid)
    const program = [
      'import socket',
      'held = []',
      'for i in range(1500):',
      '    try:',
      '        held.append(socket.create_connection(("127.0.0.1", 1023), timeout=5))',
      '    except OSError:',
      '        pass',
      'print("flooding", len(held), flush=True)',
      'import time',
      'while True: time.sleep(60)',
    ].join('\n')
    const task = await flood(program, 'holder-of-connections')
    const most = before + CONNECTIONS_PER_NAMESPACE + 64
    expect(descriptorsOf(pid)).toBeLessThan(most)
    await anotherOwnerRuns()
    expect(descriptorsOf(pid)).toBeLessThan(most)
    await daemon.client.kill(task.id)
  })
})
