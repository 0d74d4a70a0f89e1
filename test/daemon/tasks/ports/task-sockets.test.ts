import { afterEach, describe, expect, test } from 'vitest'
import { spawn, type ChildProcess } from 'node:child_process'
import { readTaskPorts, ticksSinceBoot } from '../../../../daemon/tasks/ports/task-sockets.js'
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

describe("a task's sockets", () => {
  test('the listening TCP and bound UDP sockets of its processes are found in their namespace', async () => {
    const server = await startServer()
    const ports = readTaskPorts([server.pid], ticksSinceBoot())
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
    expect(readTaskPorts([server.pid], foundAt)).toEqual([])
    expect(readTaskPorts([server.pid], ticksSinceBoot())).not.toEqual([])
  })

  test('a process that is gone, or holds no socket, adds nothing', async () => {
    const idle = spawn('sleep', ['30'])
    children.push(idle)
    await waitFor('sleep to run', () => idle.pid)
    expect(readTaskPorts([idle.pid!, 2 ** 22 + 1], ticksSinceBoot())).toEqual([])
  })
})
