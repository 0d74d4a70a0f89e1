import { describe, expect, test } from 'vitest'
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { TendClient, type SandboxProfile, type Task } from '../../client/index.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { createTempHome, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { daemonPerFile, expectTendError } from '../helpers/daemon-per-file.js'
import { rawRequest } from '../helpers/raw-http.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * A task started with tty runs on a pseudo-terminal its keeper holds: the program sees a terminal,
 * input is typed into it, a resize reaches it as SIGWINCH, and output.log gets what the terminal
 * showed, raw, copied by the keeper (never by the daemon's JavaScript).
 */

const shared = daemonPerFile('tty')

async function startOnTerminal(
  command: string,
  options: { sandbox?: SandboxProfile; tty?: { cols?: number; rows?: number } | true; maxOutputBytes?: number; client?: TendClient; cwd?: string } = {},
): Promise<Task> {
  const client = options.client ?? shared.daemon.client
  const task = await client.start({
    command,
    shell: true,
    cwd: options.cwd ?? shared.workspace,
    tty: options.tty ?? true,
    sandbox: options.sandbox ?? 'off',
    maxOutputBytes: options.maxOutputBytes,
  })
  shared.track(task.id)
  await waitFor(`task ${task.id} running`, async () => (await client.get(task.id)).state !== 'queued')
  return task
}

async function outputOf(id: string, client: TendClient = shared.daemon.client): Promise<string> {
  return (await client.read(id)).data
}

// Prints only on a terminal (bold, as `ls --color=auto` would), then its size, then each new size.
const TERMINAL_PROGRAM = [
  'if [ -t 0 ] && [ -t 1 ] && [ -t 2 ]; then printf "\\033[1mon a terminal\\033[0m\\n"; else echo "not a terminal"; fi',
  ': < /dev/tty && echo "controlling terminal"',
  'echo "size $(stty size)"',
  'trap \'echo "resized $(stty size)"\' WINCH',
  'echo ready',
  'while :; do sleep 0.05; done',
].join('\n')

describe('terminals in every sandbox profile', () => {
  for (const sandbox of ['off', 'workspace', 'strict'] as const) {
    test(`${sandbox}: the program sees a terminal of the asked size, and a resize reaches it (SIGWINCH, stty size)`, async (context) => {
      const status = await shared.daemon.client.status()
      expect(status.sandbox.profiles, `${sandbox} is not available to this daemon: ${status.sandbox.missing[sandbox]}`).toContain(sandbox)
      const task = await startOnTerminal(TERMINAL_PROGRAM, { sandbox, tty: { cols: 100, rows: 30 } })
      expect(task).toMatchObject({ tty: { cols: 100, rows: 30 }, stdin: 'pipe' })
      await waitFor(`the ${sandbox} task to be ready`, async () => (await outputOf(task.id)).includes('ready\r\n'))
      expect(await outputOf(task.id)).toBe('\x1b[1mon a terminal\x1b[0m\r\ncontrolling terminal\r\nsize 30 100\r\nready\r\n')
      const resized = await shared.daemon.client.resize(task.id, { cols: 120, rows: 40 })
      expect(resized.tty).toEqual({ cols: 120, rows: 40 })
      expect((await shared.daemon.client.get(task.id)).tty).toEqual({ cols: 120, rows: 40 })
      await waitFor(`the ${sandbox} task to see the new size`, async () => (await outputOf(task.id)).endsWith('resized 40 120\r\n'))
    })
  }
})

describe('terminals', () => {
  test('the terminal echoes what is typed, a line reaches the program, eof types Ctrl-D (cat ends); input.log holds exactly what was typed', async () => {
    const task = await startOnTerminal('cat')
    const typed = await shared.daemon.client.input(task.id, 'hello\n')
    expect(typed).toMatchObject({ acceptedBytes: 6, eof: false, inputBytes: 6 })
    // The terminal echoes the line (its \n shown as \r\n), then cat prints it.
    await waitFor("the echo and cat's copy", async () => (await outputOf(task.id)) === 'hello\r\nhello\r\n')
    const ended = await shared.daemon.client.input(task.id, '', { eof: true })
    // A terminal stays open after its EOF character: stdin is still the terminal.
    expect(ended.task.stdin).toBe('pipe')
    expect(await shared.daemon.client.wait(task.id, { timeoutMs: 10_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
    expect(readFileSync(join(task.spool, 'input.log'))).toEqual(Buffer.from('hello\n\x04'))
    expect(statSync(join(task.spool, 'resize.fifo')).isFIFO()).toBe(true)
    expect(statSync(join(task.spool, 'resize.fifo')).mode & 0o777).toBe(0o600)
    expect(statSync(join(task.spool, 'output.log')).mode & 0o777).toBe(0o600)
  })

  test("a terminal task has a terminal type: the daemon's (none here) or xterm-256color; the task's own wins", async () => {
    const task = await startOnTerminal('echo "$TERM"')
    await shared.daemon.client.wait(task.id, { timeoutMs: 10_000 })
    expect(await outputOf(task.id)).toBe(`${shared.daemon.env.TERM || 'xterm-256color'}\r\n`)
    const own = await shared.daemon.client.start({
      command: 'echo "$TERM"',
      shell: true,
      cwd: shared.workspace,
      tty: true,
      sandbox: 'off',
      env: { TERM: 'vt100' },
    })
    shared.track(own.id)
    await shared.daemon.client.wait(own.id, { timeoutMs: 10_000 })
    expect(await outputOf(own.id)).toBe('vt100\r\n')
  })

  test('the default size is 80 by 24', async () => {
    const task = await startOnTerminal('stty size')
    expect(task.tty).toEqual({ cols: 80, rows: 24 })
    expect(await shared.daemon.client.wait(task.id, { timeoutMs: 10_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
    expect(await outputOf(task.id)).toBe('24 80\r\n')
  })

  test('output.log is whole by the time the end is reported: 100000 lines printed right before the exit are all there', async () => {
    const task = await startOnTerminal('seq 1 100000; exit 7')
    const ended = await shared.daemon.client.wait(task.id, { timeoutMs: 30_000 })
    expect(ended).toMatchObject({ state: 'exited', exitCode: 7 })
    const expected = Array.from({ length: 100000 }, (_, index) => `${index + 1}\r\n`).join('')
    expect(ended.outputBytes).toBe(Buffer.byteLength(expected))
    expect(readFileSync(join(task.spool, 'output.log'), 'utf8')).toBe(expected)
  })

  test('a process left holding the terminal does not hold up the end, and is not left running', async () => {
    const task = await startOnTerminal('sleep 60 & echo left')
    const ended = await shared.daemon.client.wait(task.id, { timeoutMs: 10_000 })
    expect(ended).toMatchObject({ state: 'exited', exitCode: 0 })
    expect(await outputOf(task.id)).toBe('left\r\n')
    await waitFor('no process of the task left', () => processesWithEnv(`TEND_TASK_ID=${task.id}`).filter(isAlive).length === 0, 10_000)
  })

  test('the output cap stops a terminal task (output-cap), and output.log holds no more than the cap', async () => {
    const task = await startOnTerminal('yes', { maxOutputBytes: 200_000 })
    const ended = await shared.daemon.client.wait(task.id, { timeoutMs: 20_000 })
    expect(ended).toMatchObject({ state: 'killed', stoppedBy: 'output-cap' })
    expect(statSync(join(task.spool, 'output.log')).size).toBeLessThanOrEqual(200_000)
    expect(ended.outputBytes).toBeLessThanOrEqual(200_000)
  })

  test('a kill stops the program on the terminal and everything it started', async () => {
    const task = await startOnTerminal('sleep 60 & sleep 60; echo never')
    const killed = await shared.daemon.client.kill(task.id)
    expect(killed).toMatchObject({ state: 'killed', stoppedBy: 'operator' })
    await waitFor('no process of the task left', () => processesWithEnv(`TEND_TASK_ID=${task.id}`).filter(isAlive).length === 0, 10_000)
    expect(await outputOf(task.id)).not.toContain('never')
  })

  test('refusals: resize without a terminal, after the end, out of range; stdin null with tty', async () => {
    const plain = await shared.daemon.client.start({ command: 'sleep 60', shell: true, cwd: shared.workspace })
    shared.track(plain.id)
    await expectTendError(shared.daemon.client.resize(plain.id, { cols: 100, rows: 30 }), 'TEND_ERR_NO_TTY', new RegExp(`task ${plain.id} has no terminal`))
    const ended = await startOnTerminal('true')
    await shared.daemon.client.wait(ended.id, { timeoutMs: 10_000 })
    await expectTendError(shared.daemon.client.resize(ended.id, { cols: 100, rows: 30 }), 'TEND_ERR_TASK_FINISHED')
    const running = await startOnTerminal('sleep 60')
    await expectTendError(shared.daemon.client.resize(running.id, { cols: 0, rows: 30 }), 'TEND_ERR_VALIDATION', /cols/)
    await expectTendError(shared.daemon.client.resize(running.id, { cols: 80, rows: 10_001 }), 'TEND_ERR_VALIDATION', /rows/)
    expect((await shared.daemon.client.get(running.id)).tty).toEqual({ cols: 80, rows: 24 })
    await expectTendError(shared.daemon.client.start({ command: 'true', shell: true, cwd: shared.workspace, tty: { cols: 0 } }), 'TEND_ERR_VALIDATION', /cols/)
    await expectTendError(
      shared.daemon.client.start({ command: 'true', shell: true, cwd: shared.workspace, tty: true, stdin: 'null' }),
      'TEND_ERR_VALIDATION',
      /stdin/,
    )
    const stranger = new TendClient({ home: shared.daemon.home, autoStart: false, owner: 'someone-else' })
    try {
      await expectTendError(stranger.resize(running.id, { cols: 100, rows: 30 }), 'TEND_ERR_TASK_NOT_FOUND')
    } finally {
      stranger.close()
    }
  })

  test('the OpenAPI document shows tty on the task and the start body, and the resize route', async () => {
    type Schema = { properties: Record<string, unknown>; required?: string[] }
    const answer = await rawRequest(join(shared.daemon.home, 'tend.sock'), { method: 'GET', path: '/v1/openapi.json' })
    const document = JSON.parse(answer.text) as {
      components: { schemas: Record<string, Schema> }
      paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: Schema }> }; responses: Record<string, unknown> }>>
    }
    const task = Object.values(document.components.schemas).find((schema) => schema.properties?.stoppedBy)!
    expect(task.properties.tty).toBeDefined()
    expect(document.paths['/v1/tasks']!.post!.requestBody!.content['application/json']!.schema.properties.tty).toBeDefined()
    const resize = document.paths['/v1/tasks/{id}/resize']!.post!
    expect(Object.keys(resize.requestBody!.content['application/json']!.schema.properties).sort()).toEqual(['cols', 'rows'])
  })
})

describe('terminals outlive the daemon', () => {
  test('while no daemon runs the keeper goes on copying the output; the next daemon types into it and resizes it', async () => {
    const home = createTempHome()
    const dir = mkdtempSync('/var/tmp/tend-tty-crash-')
    let first: TestDaemon | undefined = await startTestDaemon({ home })
    let second: TestDaemon | undefined
    try {
      const script = 'echo ready; while read line; do echo "got $line $(stty size)"; done; echo eof'
      const task = await first.client.start({ command: script, shell: true, cwd: dir, tty: true, sandbox: 'off' })
      await waitFor(`task ${task.id} recorded running`, () => JSON.parse(readFileSync(join(task.spool, 'task.json'), 'utf8')).state === 'running')
      await waitFor('the task to be ready', async () => (await first!.client.read(task.id)).data === 'ready\r\n')
      await first.crash()
      first.client.close()
      first = undefined
      expect(processesWithEnv(`TEND_TASK_ID=${task.id}`).filter(isAlive).length).toBeGreaterThan(0)

      second = await startTestDaemon({ home })
      expect((await second.client.get(task.id)).state).toBe('running')
      await second.client.input(task.id, 'after\n')
      await waitFor('the line typed through the next daemon', async () => (await second!.client.read(task.id)).data.endsWith('got after 24 80\r\n'))
      await second.client.resize(task.id, { cols: 90, rows: 20 })
      await second.client.input(task.id, 'again\n')
      await waitFor('the new size, through the next daemon', async () => (await second!.client.read(task.id)).data.endsWith('got again 20 90\r\n'))
      await second.client.input(task.id, '', { eof: true })
      expect(await second.client.wait(task.id, { timeoutMs: 10_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
      expect((await second.client.read(task.id)).data).toBe('ready\r\nafter\r\ngot after 24 80\r\nagain\r\ngot again 20 90\r\neof\r\n')
    } finally {
      if (first) await first.stop()
      if (second) await second.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
