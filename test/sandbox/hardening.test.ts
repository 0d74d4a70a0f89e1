import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, unlinkSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { join } from 'node:path'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { processesWithEnv } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait-for.js'

/** Hardening beyond the escape suite: service sockets under /run, secrets in argv, system files. */
let daemon: TestDaemon
const workspace = mkdtempSync('/var/tmp/tend-hardening-')
const asRoot = process.getuid?.() === 0
const runSocket = join('/run', `tend-hardening-${process.pid}.sock`)
let server: Server | undefined
let connections = 0

beforeAll(async () => {
  daemon = await startTestDaemon({ env: { TEND_SANDBOX: 'workspace' } })
  if (asRoot) {
    server = createServer((socket) => {
      connections += 1
      socket.end('service\n')
    })
    await new Promise<void>((resolve) => server!.listen(runSocket, resolve))
  }
})
afterAll(async () => {
  if (server) await new Promise((resolve) => server!.close(resolve))
  if (existsSync(runSocket)) unlinkSync(runSocket)
  await daemon.stop()
  rmSync(workspace, { recursive: true, force: true })
})

async function run(command: string, options: { env?: Record<string, string> } = {}): Promise<string> {
  const task = await daemon.client.start({ command, shell: true, cwd: workspace, env: options.env })
  await daemon.client.wait(task.id)
  return (await daemon.client.read(task.id)).data
}

describe('sandbox hardening', () => {
  test('a service socket under /run cannot be reached: /run is empty inside', async (context) => {
    if (!asRoot) context.skip('creating a socket under /run needs root')
    const output = await run(`ls /run | wc -l; python3 -c "
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print('CONNECTED')
except OSError as e:
    print('blocked', e.strerror)
" ${runSocket}`)
    expect(output).toMatch(/^0\nblocked No such file or directory\n$/)
    expect(connections).toBe(0)
  })

  test('a sandboxed task gets its TERM and its grace period before anything is killed', async () => {
    const task = await daemon.client.start({
      command: 'trap "echo got TERM; exit 0" TERM; echo ready; while :; do sleep 0.05; done',
      shell: true,
      cwd: workspace,
    })
    await waitFor('the task to print ready', async () => (await daemon.client.read(task.id)).data === 'ready\n')
    const killed = await daemon.client.kill(task.id, { graceMs: 10_000 })
    expect(killed).toMatchObject({ state: 'killed', reason: 'killed by request (SIGTERM)' })
    // The shell may also report its sleep's death ("Terminated") before its trap runs.
    expect((await daemon.client.read(task.id)).data).toMatch(/^ready\n(Terminated\n)?got TERM\n$/)
  })

  test('--env values reach the task but never appear on any command line', async () => {
    const value = 'planted-env-value-e11f07'
    const task = await daemon.client.start({ command: 'echo "got $API_TOKEN"; sleep 30', shell: true, cwd: workspace, env: { API_TOKEN: value } })
    await waitFor('the task to print its variable', async () => (await daemon.client.read(task.id)).data.includes('got'))
    const commandLines = processesWithEnv(`TEND_TASK_ID=${task.id}`).map((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8')
      } catch {
        return ''
      }
    })
    expect(commandLines.length).toBeGreaterThan(0)
    expect(commandLines.filter((line) => line.includes(value))).toEqual([])
    expect((await daemon.client.read(task.id)).data).toBe(`got ${value}\n`)
    await daemon.client.kill(task.id)
  })

  test('password hashes are masked even for a root daemon', async (context) => {
    if (!asRoot || !existsSync('/etc/shadow')) context.skip('needs a root daemon and an /etc/shadow')
    const output = await run('cat /etc/shadow 2>/dev/null | wc -c')
    expect(output).toBe('0\n')
    expect(readFileSync('/etc/shadow').length).toBeGreaterThan(0)
  })

  test.each([['/etc'], ['/usr/local'], ['/var/lib'], ['/']])('cwd %s is refused under a sandbox', async (cwd) => {
    await expect(daemon.client.start({ command: ['true'], cwd })).rejects.toMatchObject({
      code: 'TEND_ERR_VALIDATION',
      message: expect.stringContaining(`body/cwd: under sandbox workspace ${cwd} would become writable`),
    })
  })

  test('a symlink to a system folder is refused as a writable path', async () => {
    const link = join(workspace, 'etc-link')
    symlinkSync('/etc', link)
    await expect(daemon.client.start({ command: ['true'], cwd: workspace, writablePaths: [link] })).rejects.toMatchObject({
      code: 'TEND_ERR_VALIDATION',
      message: expect.stringContaining(`body/writablePaths: under sandbox workspace ${link} would become writable (it is /etc)`),
    })
    expect(await daemon.client.list({ all: true })).not.toContainEqual(expect.objectContaining({ writablePaths: [link] }))
  })
})
