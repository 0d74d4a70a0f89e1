import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, test } from 'vitest'
import { REPO_ROOT } from '../helpers/test-daemon.js'

/*
 * The console's "run again" request, made of a finished task's record, run in Node (the page's
 * plain ES module, imported by URL): what is replayed, what cannot be, and what the confirmation
 * says. The browser test (console-input.test.ts) starts one for real.
 */

type Loose = Record<string, unknown>
const { againRequest, againLines } = (await import(pathToFileURL(join(REPO_ROOT, 'daemon/console/page/tasks/again-request.js')).href)) as {
  againRequest: (task: Loose) => Loose
  againLines: (body: Loose, task: Loose) => string[]
}

const finished = (fields: Loose = {}): Loose => ({
  id: 'abcd1234efgh',
  name: null,
  owner: 'alice',
  command: ['python3', 'serve.py'],
  shell: false,
  cwd: '/home/alice/app',
  envKeys: [],
  timeoutMs: null,
  maxOutputBytes: 1048576,
  lifetime: 'owner',
  stdin: null,
  tty: null,
  sandbox: 'workspace',
  network: 'loopback',
  writablePaths: [],
  memoryBytes: null,
  pidsMax: null,
  state: 'exited',
  ...fields,
})

describe('run again', () => {
  test('replays the command, cwd, owner, lifetime, sandbox, network and output cap; leaves out what was not set', () => {
    expect(againRequest(finished())).toEqual({
      command: ['python3', 'serve.py'],
      shell: false,
      cwd: '/home/alice/app',
      owner: 'alice',
      sandbox: 'workspace',
      network: 'loopback',
      lifetime: 'owner',
      maxOutputBytes: 1048576,
    })
  })

  test('a shell line is sent as the line, not as sh -c', () => {
    const body = againRequest(finished({ command: ['sh', '-c', 'make && ./run'], shell: true }))
    expect(body.command).toEqual(['make && ./run'])
    expect(body.shell).toBe(true)
  })

  test('limits, writable paths, allowed destinations, a terminal, a pipe, readiness and ports are replayed', () => {
    const body = againRequest(
      finished({
        name: 'server',
        timeoutMs: 60_000,
        memoryBytes: 1 << 30,
        pidsMax: 64,
        writablePaths: ['/tmp/out'],
        network: 'allow',
        allowNet: ['registry.example'],
        tty: { cols: 120, rows: 40 },
        stdin: 'closed',
        readyWhen: { pattern: 'listening', timeoutMs: 30_000 },
        port: 40123,
        portAuto: true,
      }),
    )
    expect(body).toMatchObject({
      name: 'server (again)',
      timeoutMs: 60_000,
      memoryBytes: 1 << 30,
      pidsMax: 64,
      writablePaths: ['/tmp/out'],
      allowNet: ['registry.example'],
      tty: { cols: 120, rows: 40 },
      stdin: 'pipe',
      ready: { pattern: 'listening', timeoutMs: 30_000 },
      port: 'auto',
    })
    expect(againRequest(finished({ port: 8080 })).port).toBe(8080)
  })

  test('a name at its longest stays within 200 characters with its suffix', () => {
    expect(againRequest(finished({ name: 'n'.repeat(200) })).name).toHaveLength(200)
  })

  test('the confirmation shows what runs, and says the environment and dependencies are not replayed', () => {
    const task = finished({ envKeys: ['API_KEY', 'DEBUG'], after: ['zzzz1111yyyy'] })
    const text = againLines(againRequest(task), task).join('\n')
    expect(text).toContain('python3 serve.py')
    expect(text).toContain('/home/alice/app')
    expect(text).toContain('sandbox workspace')
    expect(text).toMatch(/API_KEY, DEBUG \(their values are never stored\)/)
    expect(text).toContain('zzzz1111yyyy')
    expect(againLines(againRequest(finished()), finished()).join('\n')).not.toMatch(/Not replayed/)
  })
})
