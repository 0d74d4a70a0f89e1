import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { textWithCost } from '../helpers/cost-line.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { REPO_ROOT, startTestDaemon, TEND_BIN, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/**
 * End to end: `tend mcp` (built, from dist/ through bin/tend.js) as a child process, driven by the
 * official MCP SDK client over stdio, against a real test daemon.
 */

interface TextResult {
  text: string
  blocks: string[]
  isError: boolean
}

interface McpSession {
  client: Client
  transport: StdioClientTransport
  /** The server process id (to check that it exits). */
  pid: number
  /** Data of every logging notification received, in order. */
  logs: string[]
  stderr: () => string
  call: (name: string, args?: Record<string, unknown>) => Promise<TextResult>
  close: () => Promise<void>
}

let daemon: TestDaemon
let scratch: string
const open: McpSession[] = []

beforeAll(async () => {
  daemon = await startTestDaemon()
  scratch = mkdtempSync(join(tmpdir(), 'tend-mcp-'))
})

afterEach(async () => {
  await Promise.all(open.splice(0).map((session) => session.close()))
})

afterAll(async () => {
  await Promise.all(open.splice(0).map((session) => session.close()))
  rmSync(scratch, { recursive: true, force: true })
  // stop() asserts that no process of this home (daemon, task or `tend mcp` server) is left.
  await daemon?.stop()
})

async function connect(extraArgs: string[] = []): Promise<McpSession> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [TEND_BIN, 'mcp', ...extraArgs], env: daemon.env, stderr: 'pipe' })
  let stderr = ''
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const client = new Client({ name: 'tend-mcp-test', version: '0.0.0' })
  const logs: string[] = []
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
    logs.push(typeof notification.params.data === 'string' ? notification.params.data : JSON.stringify(notification.params.data))
  })
  await client.connect(transport)
  const pid = transport.pid
  if (pid === null) throw new Error(`tend mcp did not start (stderr: ${stderr})`)
  let closed = false
  const session: McpSession = {
    client,
    transport,
    pid,
    logs,
    stderr: () => stderr,
    async call(name, args = {}) {
      const result = await client.callTool({ name, arguments: args })
      const blocks = (result.content as Array<{ type: string; text?: string }>).map((block) => {
        expect(block.type).toBe('text')
        return block.text ?? ''
      })
      return { text: blocks.join('\n'), blocks, isError: result.isError === true }
    },
    async close() {
      if (closed) return
      closed = true
      await client.close()
      await waitFor(`tend mcp server ${pid} to exit (stderr: ${stderr})`, () => !isAlive(pid))
    },
  }
  open.push(session)
  return session
}

function taskIdOf(result: TextResult): string {
  expect(result.isError, result.text).toBe(false)
  const match = /Started background task ([a-z0-9]{12}) /.exec(result.text)
  if (!match) throw new Error(`no task id in bash result: ${result.text}`)
  return match[1]!
}

function liveProcessesOf(taskId: string): number[] {
  return processesWithEnv(`TEND_TASK_ID=${taskId}`).filter(isAlive)
}

/** The notice of a task that exited 0: the contract's sentence, then what it cost. */
function noticeFor(id: string, label: string): RegExp {
  return textWithCost(`background task ${id} (${label}) finished [status: exited, exit code: 0]. Read its output with task_output.`, 'exited 0')
}

/** A shell loop that waits for `path` to exist. */
function gate(path: string): string {
  return `until [ -e '${path}' ]; do sleep 0.02; done`
}

describe('tend mcp over stdio with the MCP SDK client', () => {
  test('lists bash, task_output, task_input, task_kill and task_list with JSON-Schema input schemas', async () => {
    const session = await connect()
    expect(session.client.getServerVersion()?.name).toBe('tend')
    expect(session.client.getServerCapabilities()).toMatchObject({ tools: {}, logging: {} })
    const { tools } = await session.client.listTools()
    expect(tools.map((tool) => tool.name)).toEqual(['bash', 'task_output', 'task_input', 'task_kill', 'task_list'])
    const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]))
    for (const tool of tools) {
      expect(tool.description, tool.name).toBeTruthy()
      expect(tool.inputSchema.type).toBe('object')
    }
    expect(byName.bash!.inputSchema.required).toEqual(['command'])
    expect(byName.bash!.inputSchema.properties).toMatchObject({
      command: { type: 'string' },
      description: { type: 'string' },
      timeout: { type: 'number' },
      run_in_background: { type: 'boolean' },
      cwd: { type: 'string' },
      yield_ms: { type: 'number' },
    })
    expect(byName.bash!.inputSchema.properties).toMatchObject({ stdin: { type: 'boolean' }, tty: { type: 'boolean' } })
    expect(byName.task_input!.inputSchema.required).toEqual(['task_id', 'text'])
    expect(Object.keys(byName.task_input!.inputSchema.properties ?? {}).sort()).toEqual(['eof', 'task_id', 'text', 'yield_ms'])
    expect(byName.task_output!.inputSchema.required).toEqual(['task_id'])
    expect(Object.keys(byName.task_output!.inputSchema.properties ?? {}).sort()).toEqual(['filter', 'from', 'max_bytes', 'task_id', 'wait_for', 'wait_ms'])
    expect(byName.task_kill!.inputSchema.required).toEqual(['task_id'])
    expect(byName.task_kill!.inputSchema.properties).toMatchObject({ signal: { type: 'string', enum: expect.arrayContaining(['TERM', 'KILL']) } })
    expect(byName.task_list!.inputSchema.required ?? []).toEqual([])
  })

  test('docs/agents.md quotes every tool description and parameter the model sees, verbatim', async () => {
    const session = await connect()
    const doc = readFileSync(join(REPO_ROOT, 'docs', 'agents.md'), 'utf8')
    const { tools } = await session.client.listTools()
    for (const tool of tools) {
      expect(doc, `the description of ${tool.name}`).toContain(`### \`${tool.name}\`\n\n\`\`\`text\n${tool.description}\n\`\`\``)
      const required = tool.inputSchema.required ?? []
      for (const [name, schema] of Object.entries(tool.inputSchema.properties ?? {}) as Array<
        [string, { type: string; description?: string; enum?: string[] }]
      >) {
        const type = schema.enum ? `${schema.type}: ${schema.enum.map((value) => `\`${value}\``).join(', ')}` : schema.type
        expect(doc, `the row of ${tool.name}.${name}`).toContain(
          `| \`${name}\` | ${type} | ${required.includes(name) ? 'yes' : 'no'} | ${schema.description ?? ''} |`,
        )
      }
    }
  })

  test('bash in the foreground returns the output and the exit code; a non-zero exit is not an error', async () => {
    const session = await connect()
    const result = await session.call('bash', { command: 'echo hi; exit 3' })
    expect(result.isError).toBe(false)
    expect(result.text).toContain('hi')
    expect(result.text).toContain('[exit code: 3]')
  })

  test('a Python REPL driven through bash (stdin: true) and task_input: define a variable, print it, exit', async () => {
    const session = await connect()
    const id = taskIdOf(await session.call('bash', { command: 'python3 -u -i -q', description: 'python', run_in_background: true, stdin: true }))
    const defined = await session.call('task_input', { task_id: id, text: 'answer = 6 * 7\n' })
    expect(defined.isError, defined.text).toBe(false)
    expect(defined.text).toMatch(new RegExp(`^sent 15 bytes to the stdin of task ${id}\ntask ${id} \\(python\\): running;`))
    const printed = await session.call('task_input', { task_id: id, text: 'print(answer)\n', yield_ms: 5000 })
    expect(printed.text).toContain('42')
    const exited = await session.call('task_input', { task_id: id, text: 'exit()\n', yield_ms: 10_000 })
    expect(exited.text).toContain('[exit code: 0]')
    expect((await daemon.client.get(id)).state).toBe('exited')
    const refused = await session.call('task_input', { task_id: id, text: 'more\n' })
    expect(refused).toMatchObject({ isError: true })
    expect(refused.text).toContain(`task ${id} has ended (exited)`)
  })

  test('a Python HTTP server started in the background and waited for with task_output wait_for: the result ends at its line', async () => {
    const session = await connect()
    const id = taskIdOf(await session.call('bash', { command: 'python3 -u -m http.server 0 --bind 127.0.0.1', description: 'web', run_in_background: true }))
    const up = await session.call('task_output', { task_id: id, wait_for: 'Serving HTTP on .* port \\d+', wait_ms: 30_000 })
    expect(up.isError, up.text).toBe(false)
    const line = /\[wait_for \/.*\/: matched the line "(Serving HTTP on 127\.0\.0\.1 port (\d+) [^"]*)"\]\n/.exec(up.text)
    expect(line, up.text).not.toBeNull()
    expect(up.text.endsWith(`${line![1]}\n[still running: call task_output again later, or with wait_ms to wait for more]`)).toBe(true)
    const fetched = await session.call('bash', {
      command: `python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:${line![2]}/').status)"`,
    })
    // The answer and the exit; what the request cost may follow on a line of its own.
    expect(fetched.text.split('\n').slice(0, 2)).toEqual(['200', '[exit code: 0]'])
    const logged = await session.call('task_output', { task_id: id, wait_for: '"GET / HTTP/1.1" 200', wait_ms: 30_000 })
    expect(logged.text).toContain('[wait_for /"GET / HTTP/1.1" 200/: matched the line')
    await session.call('task_kill', { task_id: id })
    expect(liveProcessesOf(id)).toEqual([])
  })

  test('a dev server started with bash ready and port "auto": the call returns once it is ready, then it is used and stopped', async () => {
    const session = await connect()
    const started = await session.call('bash', {
      command: 'exec python3 -u -m http.server "$PORT" --bind 127.0.0.1',
      description: 'web',
      run_in_background: true,
      port: 'auto',
      ready: { pattern: 'Serving HTTP on', timeout_ms: 30_000 },
    })
    const id = taskIdOf(started)
    const port = /It was given port (\d+) as PORT\./.exec(started.text)?.[1]
    expect(port, started.text).toBeDefined()
    expect(started.text).toMatch(new RegExp(`\\[ready after [0-9.]+ (ms|s): the line "Serving HTTP on 127\\.0\\.0\\.1 port ${port} [^"]*" matched; `))
    const fetched = await session.call('bash', {
      command: `python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:${port}/').status)"`,
    })
    // The answer and the exit; what the request cost may follow on a line of its own.
    expect(fetched.text.split('\n').slice(0, 2)).toEqual(['200', '[exit code: 0]'])
    await session.call('task_kill', { task_id: id })
    expect(liveProcessesOf(id)).toEqual([])
  })

  test('sh on a terminal (bash tty: true) driven through task_input: every result is plain text, and eof types Ctrl-D', async () => {
    const session = await connect()
    const id = taskIdOf(
      await session.call('bash', { command: 'PS1="$(printf "\\033[1m$\\033[0m ")" sh', description: 'shell', run_in_background: true, tty: true }),
    )
    const prompt = await session.call('task_output', { task_id: id, wait_ms: 10_000 })
    expect(prompt.text).toMatch(/ \(shell\): running; bytes 0–10 of 10\n\$ \n\[still running/)
    const answered = await session.call('task_input', { task_id: id, text: 'printf "\\033[31m%s\\033[0m\\n" "$((6 * 7))"\n', yield_ms: 5000 })
    expect(answered.isError, answered.text).toBe(false)
    expect(answered.text).toContain('printf "\\033[31m%s\\033[0m\\n" "$((6 * 7))"\n42\n$ ')
    expect(answered.text).not.toMatch(/[\u001b\r]/)
    const ended = await session.call('task_input', { task_id: id, text: '', eof: true, yield_ms: 10_000 })
    expect(ended.text).toContain(`typed 0 bytes into the terminal of task ${id}, then Ctrl-D (end of input; the terminal stays open)`)
    expect(ended.text).toContain('[exit code: 0]')
    expect(liveProcessesOf(id)).toEqual([])
  })

  test('a foreground bash that outlives yield_ms returns "still running" with its task id; task_output reads on; one notice when it ends', async () => {
    const session = await connect()
    await session.client.setLoggingLevel('info')
    const more = join(scratch, 'yield-more')
    const stop = join(scratch, 'yield-stop')
    const result = await session.call('bash', { command: `echo ready; ${gate(more)}; echo serving; ${gate(stop)}`, description: 'dev server', yield_ms: 1500 })
    expect(result.isError, result.text).toBe(false)
    const match =
      /^ready\n\[still running after 1500ms; it goes on as background task ([a-z0-9]{12}) \(dev server\)\. Read more with task_output \(task_id: "\1"\); stop it with task_kill\./.exec(
        result.text,
      )
    if (!match) throw new Error(`not a yielded result: ${result.text}`)
    const id = match[1]!
    expect((await daemon.client.get(id)).state).toBe('running')

    writeFileSync(more, '')
    const read = await session.call('task_output', { task_id: id, wait_ms: 10_000 })
    expect(read.text).toBe(
      `task ${id} (dev server): running; bytes 6–14 of 14\nserving\n[still running: call task_output again later, or with wait_ms to wait for more]`,
    )

    writeFileSync(stop, '')
    const expected = noticeFor(id, 'dev server')
    await waitFor(`the logging notification for task ${id} (logs so far: ${JSON.stringify(session.logs)})`, () =>
      session.logs.some((log) => expected.test(log)),
    )
    const listed = await session.call('task_list')
    expect(listed.blocks.slice(1)).toEqual([expect.stringMatching(expected)])
    expect((await session.call('task_list')).blocks).toHaveLength(1)
    expect(session.logs.filter((log) => log.includes(id))).toEqual([expect.stringMatching(expected)])
  })

  test('a background task is read incrementally with a per-session cursor; from: 0 re-reads without moving it', async () => {
    const session = await connect()
    const gate2 = join(scratch, 'incremental-2')
    const gate3 = join(scratch, 'incremental-3')
    const started = await session.call('bash', {
      command: `echo line1; ${gate(gate2)}; echo line2; ${gate(gate3)}; echo line3`,
      description: 'gated lines',
      run_in_background: true,
    })
    expect(started.text).toContain('task_output')
    const id = taskIdOf(started)

    const first = await session.call('task_output', { task_id: id, wait_ms: 10_000 })
    expect(first.isError, first.text).toBe(false)
    expect(first.text).toContain('line1')
    expect(first.text).not.toContain('line2')
    expect(first.text).toContain('still running')

    writeFileSync(gate2, '')
    const second = await session.call('task_output', { task_id: id, wait_ms: 10_000 })
    expect(second.isError, second.text).toBe(false)
    expect(second.text).toContain('line2')
    expect(second.text).not.toContain('line1')

    const reread = await session.call('task_output', { task_id: id, from: 0 })
    expect(reread.isError, reread.text).toBe(false)
    expect(reread.text).toContain('line1\nline2')

    const filtered = await session.call('task_output', { task_id: id, from: 0, filter: '^line2$' })
    expect(filtered.text).toContain('line2')
    expect(filtered.text).not.toContain('line1')

    // Neither non-consuming read moved the cursor: nothing new for this session.
    const nothingNew = await session.call('task_output', { task_id: id })
    expect(nothingNew.text).toContain('(no new output)')
    expect(nothingNew.text).not.toMatch(/line[12]/)

    writeFileSync(gate3, '')
    let rest = ''
    await waitFor(`task ${id} to end in task_output`, async () => {
      const read = await session.call('task_output', { task_id: id, wait_ms: 5_000 })
      expect(read.isError, read.text).toBe(false)
      rest += `${read.text}\n`
      return read.text.includes('[exit code: 0]')
    })
    expect(rest.match(/line3/g)).toHaveLength(1)
    expect(rest).not.toMatch(/line[12]/)
  })

  test('task_kill stops a running background task and its process is gone when it answers', async () => {
    const session = await connect()
    const id = taskIdOf(await session.call('bash', { command: 'sleep 1000', description: 'sleeper', run_in_background: true }))
    await waitFor(`a live process of task ${id}`, () => liveProcessesOf(id).length > 0)

    const killed = await session.call('task_kill', { task_id: id, reason: 'the test is done with it' })
    expect(killed.isError, killed.text).toBe(false)
    expect(killed.text).toContain(id)
    expect(killed.text).toContain('killed')
    expect(killed.text).toContain('no process of it is left')
    // task_kill answers after the tree is gone: no waiting here.
    expect(liveProcessesOf(id)).toEqual([])
    expect(await daemon.client.get(id)).toMatchObject({ state: 'killed', reason: expect.stringContaining('the test is done with it') })

    // The agent killed it, so it saw the ending: no notice follows, on either channel.
    const listed = await session.call('task_list')
    expect(listed.text).toMatch(new RegExp(`${id}\\s+killed`))
    expect(listed.blocks).toHaveLength(1)
    expect(session.logs.filter((log) => log.includes(id))).toEqual([])
  })

  test('a task that finishes on its own sends one notice as a log message and on the next tool result', async () => {
    const session = await connect()
    await session.client.setLoggingLevel('info')
    const go = join(scratch, 'notice-go')
    const started = await session.call('bash', { command: `${gate(go)}; echo finished`, description: 'notice probe', run_in_background: true })
    const id = taskIdOf(started)
    // Only one block: no notice rode on the start.
    expect(started.blocks).toHaveLength(1)

    writeFileSync(go, '')
    const expected = noticeFor(id, 'notice probe')
    await waitFor(`the logging notification for task ${id} (logs so far: ${JSON.stringify(session.logs)})`, () =>
      session.logs.some((log) => expected.test(log)),
    )

    const listed = await session.call('task_list')
    expect(listed.isError).toBe(false)
    expect(listed.blocks[0]).toMatch(new RegExp(`${id}\\s+exited`))
    expect(listed.blocks.at(-1)).toMatch(expected)

    // Exactly once: the next result does not carry it again, nor does another log message come.
    const again = await session.call('task_list')
    expect(again.blocks).toHaveLength(1)
    expect(session.logs.filter((log) => log.includes(id))).toEqual([expect.stringMatching(expected)])

    const output = await session.call('task_output', { task_id: id })
    expect(output.text).toContain('finished')
    expect(output.text).toContain('[exit code: 0]')
  })

  test('the notice of a task stopped at its time limit says who stopped it', async () => {
    const session = await connect()
    await session.client.setLoggingLevel('info')
    const id = taskIdOf(await session.call('bash', { command: 'sleep 1000', description: 'too slow', run_in_background: true, timeout: 500 }))
    const expected = textWithCost(
      `background task ${id} (too slow) finished [status: timed_out, exit code: none, stopped by: timeout]. Read its output with task_output.`,
      'timed out',
    )
    await waitFor(`the logging notification for task ${id} (logs so far: ${JSON.stringify(session.logs)})`, () =>
      session.logs.some((log) => expected.test(log)),
    )
    expect(session.logs.filter((log) => log.includes(id))).toEqual([expect.stringMatching(expected)])
  })

  test('bad arguments and unknown tools answer isError with a message naming the problem', async () => {
    const session = await connect()
    const noCommand = await session.call('bash', {})
    expect(noCommand.isError).toBe(true)
    expect(noCommand.text).toMatch(/command/)
    expect(noCommand.text).toMatch(/required/)

    const wrongType = await session.call('bash', { command: 42 })
    expect(wrongType.isError).toBe(true)
    expect(wrongType.text).toMatch(/command/)

    const emptyCommand = await session.call('bash', { command: '   ' })
    expect(emptyCommand.isError).toBe(true)
    expect(emptyCommand.text).toMatch(/command is empty/)

    const id = taskIdOf(await session.call('bash', { command: 'echo some output', run_in_background: true }))
    const badFilter = await session.call('task_output', { task_id: id, filter: '(' })
    expect(badFilter.isError).toBe(true)
    expect(badFilter.text).toMatch(/filter is not a valid regular expression/)

    const badSignal = await session.call('task_kill', { task_id: id, signal: 'BOGUS' })
    expect(badSignal.isError).toBe(true)
    expect(badSignal.text).toMatch(/signal/)

    const unknown = await session.call('no_such_tool', {})
    expect(unknown.isError).toBe(true)
    expect(unknown.text).toMatch(/unknown tool: no_such_tool/)
  })

  test("two MCP sessions have different owners and cannot read or kill each other's tasks", async () => {
    const a = await connect(['--owner', 'agent-a'])
    const b = await connect()
    const id = taskIdOf(await a.call('bash', { command: 'sleep 1000', description: 'a sleeper', run_in_background: true }))
    await waitFor(`a live process of task ${id}`, () => liveProcessesOf(id).length > 0)

    const read = await b.call('task_output', { task_id: id })
    expect(read.isError).toBe(true)
    expect(read.text).toMatch(/task not found/)
    const kill = await b.call('task_kill', { task_id: id })
    expect(kill.isError).toBe(true)
    expect(kill.text).toMatch(/task not found/)
    expect((await b.call('task_list')).text).not.toContain(id)

    // B's own task has B's owner; A's task is untouched and still A's.
    const ownId = taskIdOf(await b.call('bash', { command: 'true', run_in_background: true }))
    const [taskA, taskB] = await Promise.all([daemon.client.get(id), daemon.client.get(ownId)])
    expect(taskA).toMatchObject({ owner: 'agent-a', state: 'running' })
    expect(taskB.owner).toMatch(/^mcp-/)
    expect(taskB.owner).not.toBe(taskA.owner)
    expect(liveProcessesOf(id).length).toBeGreaterThan(0)
    expect((await a.call('task_list')).text).toContain(id)
  })

  test("closing the client stops that session's running tasks", async () => {
    const session = await connect()
    const id = taskIdOf(await session.call('bash', { command: 'sleep 1000', description: 'orphan candidate', run_in_background: true }))
    await waitFor(`a live process of task ${id}`, () => liveProcessesOf(id).length > 0)

    await session.close()
    const task = await waitFor(`task ${id} to be stopped after its session closed`, async () => {
      const current = await daemon.client.get(id)
      return current.state === 'running' ? undefined : current
    })
    expect(task.state).toBe('killed')
    expect(task.reason).toMatch(/agent was disposed/)
    expect(liveProcessesOf(id)).toEqual([])
  })

  test('closing the client leaves a task started with persistent: true running; its other task is stopped by session-end', async () => {
    const session = await connect()
    const kept = taskIdOf(await session.call('bash', { command: 'sleep 1000', description: 'server', run_in_background: true, persistent: true }))
    const owned = taskIdOf(await session.call('bash', { command: 'sleep 1000', description: 'scratch', run_in_background: true }))
    await waitFor(`live processes of tasks ${kept} and ${owned}`, () => liveProcessesOf(kept).length > 0 && liveProcessesOf(owned).length > 0)

    await session.close()
    const stopped = await waitFor(`task ${owned} to be stopped after its session closed`, async () => {
      const current = await daemon.client.get(owned)
      return current.state === 'running' ? undefined : current
    })
    expect(stopped).toMatchObject({ state: 'killed', stoppedBy: 'session-end' })
    expect(await daemon.client.get(kept)).toMatchObject({ state: 'running', lifetime: 'persistent' })
    expect(liveProcessesOf(kept).length).toBeGreaterThan(0)
    // The operator stops it, and says so.
    expect(await daemon.client.kill(kept)).toMatchObject({ state: 'killed', stoppedBy: 'operator' })
    expect(liveProcessesOf(kept)).toEqual([])
  })

  test("a server stopped with SIGTERM (as many clients do) also stops its session's running tasks", async () => {
    const session = await connect()
    const id = taskIdOf(await session.call('bash', { command: 'sleep 1000', description: 'signalled', run_in_background: true }))
    await waitFor(`a live process of task ${id}`, () => liveProcessesOf(id).length > 0)

    process.kill(session.pid, 'SIGTERM')
    await waitFor(`tend mcp server ${session.pid} to exit after SIGTERM`, () => !isAlive(session.pid))
    const task = await daemon.client.get(id)
    expect(task.state).toBe('killed')
    expect(task.reason).toMatch(/agent was disposed/)
    expect(liveProcessesOf(id)).toEqual([])
  })

  test('with --keep-tasks, closing the client leaves its running tasks alone', async () => {
    const session = await connect(['--keep-tasks'])
    const id = taskIdOf(await session.call('bash', { command: 'sleep 1000', description: 'kept', run_in_background: true }))
    await waitFor(`a live process of task ${id}`, () => liveProcessesOf(id).length > 0)

    await session.close()
    expect((await daemon.client.get(id)).state).toBe('running')
    expect(liveProcessesOf(id).length).toBeGreaterThan(0)
    // The operator cleans up.
    expect(await daemon.client.kill(id)).toMatchObject({ state: 'killed' })
    expect(liveProcessesOf(id)).toEqual([])
  })
})
