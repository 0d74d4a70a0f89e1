import { afterEach, describe, expect, test } from 'vitest'
import { spawn, type ChildProcess } from 'node:child_process'
import { MAX_SCANNED_DESCRIPTORS, readTaskPorts, ticksSinceBoot } from '../../../../daemon/tasks/ports/task-sockets.js'
import { waitFor } from '../../../helpers/wait-for.js'

const children: ChildProcess[] = []
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    }
  }
})

/** A python server on 127.0.0.1 (TCP) and ::1 (UDP), each on a port of the kernel's pick: answers the process and its ports. */
async function startServer(): Promise<{ pid: number; tcp: number; udp: number }> {
  const program = [
    'import socket, sys',
    't = socket.socket(); t.bind(("127.0.0.1", 0)); t.listen()',
    'u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); u.bind(("::1", 0))',
    'print(t.getsockname()[1], u.getsockname()[1], flush=True)',
    'sys.stdin.read()',
  ].join('\n')
  const child = spawn('python3', ['-u', '-c', program], { stdio: ['pipe', 'pipe', 'inherit'] })
  children.push(child)
  let output = ''
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const line = await waitFor('the server to print its ports', () => (output.includes('\n') ? output : null))
  const [tcp, udp] = line.trim().split(' ').map(Number)
  return { pid: child.pid!, tcp: tcp!, udp: udp! }
}

/** A python process bound to `count` UDP sockets on 127.0.0.1 (the kernel's ports): answers its pid once all are bound. */
async function startManySockets(count: number): Promise<number> {
  const program = [
    'import socket, sys',
    `s = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(${count})]`,
    'for u in s: u.bind(("127.0.0.1", 0))',
    'print("bound", flush=True)',
    'sys.stdin.read()',
  ].join('\n')
  const child = spawn('python3', ['-u', '-c', program], { stdio: ['pipe', 'pipe', 'inherit'] })
  children.push(child)
  let output = ''
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()))
  await waitFor(`${count} sockets to be bound`, () => output.includes('bound\n'), 20_000)
  return child.pid!
}

describe("a task's sockets", () => {
  test('the listening TCP and bound UDP sockets of its processes are found in their namespace', async () => {
    const server = await startServer()
    const ports = await readTaskPorts([server.pid], ticksSinceBoot())
    expect(ports).toEqual(
      [
        { proto: 'tcp', address: '127.0.0.1', port: server.tcp },
        { proto: 'udp', address: '::1', port: server.udp },
      ].sort((a, b) => a.port - b.port),
    )
  })

  test('a process that started after its membership was looked at (a reused pid) lends no sockets', async () => {
    const foundAt = ticksSinceBoot()
    // The next clock tick: a process started from now on has a later start time.
    await waitFor('the clock to tick past the look', () => ticksSinceBoot() > foundAt)
    const server = await startServer()
    expect(await readTaskPorts([server.pid], foundAt)).toEqual([])
    expect(await readTaskPorts([server.pid], ticksSinceBoot())).not.toEqual([])
  })

  test('a process that is gone, or holds no socket, adds nothing', async () => {
    const idle = spawn('sleep', ['30'])
    children.push(idle)
    await waitFor('sleep to run', () => idle.pid)
    expect(await readTaskPorts([idle.pid!, 2 ** 22 + 1], ticksSinceBoot())).toEqual([])
  })

  test('a look at thousands of sockets lets the daemon answer others meanwhile, and looks at no more descriptors than its bound', async () => {
    const pid = await startManySockets(MAX_SCANNED_DESCRIPTORS + 500)
    // Turns of the event loop while the look runs: a look that blocks it lets none happen.
    let turns = 0
    let looking = true
    const turn = () => {
      turns++
      if (looking) setImmediate(turn)
    }
    setImmediate(turn)
    const ports = await readTaskPorts([pid], ticksSinceBoot())
    looking = false
    expect(turns).toBeGreaterThan(10)
    // The process's sockets past the bound are not looked at (its first few descriptors are not sockets).
    expect(ports.length).toBeGreaterThan(MAX_SCANNED_DESCRIPTORS - 100)
    expect(ports.length).toBeLessThanOrEqual(MAX_SCANNED_DESCRIPTORS)
    expect(ports.every((port) => port.proto === 'udp' && port.address === '127.0.0.1')).toBe(true)
  }, 60_000)
})
