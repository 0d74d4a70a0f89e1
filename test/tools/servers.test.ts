import { describe, expect, test } from 'vitest'
import { createServer, type AddressInfo } from 'node:net'
import { pluginPerFile } from '../harness/plugin-per-file.js'
import { callTool, TestAgent, textOf } from '../harness/host.js'
import { waitFor } from '../helpers/wait-for.js'

const shared = pluginPerFile('servers')

/** A port nothing listens on now (the kernel's pick, let go at once). */
async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

const idIn = (text: string) => /Started background task ([0-9a-z]{12})/.exec(text)![1]!

describe('a dev server through bash', () => {
  test('port: "auto" gives the command a free PORT, and the result says which; task_list and task_output show where it listens', async () => {
    const agent = new TestAgent('servers-1')
    const started = await callTool(shared.host, agent, {
      name: 'bash',
      arguments: { command: 'exec python3 -u -m http.server "$PORT" --bind 127.0.0.1', description: 'web', run_in_background: true, port: 'auto' },
    })
    const text = textOf(started)
    const port = Number(/ It was given port (\d+) as PORT\./.exec(text)?.[1])
    expect(port, text).toBeGreaterThanOrEqual(20_000)
    const id = idIn(text)
    const up = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, wait_for: `port ${port}`, wait_ms: 30_000 } })
    expect(textOf(up)).toContain(`matched the line "Serving HTTP on 127.0.0.1 port ${port}`)
    const listed = await waitFor('task_list to name the port', async () => {
      const list = textOf(await callTool(shared.host, agent, { name: 'task_list', arguments: {} }))
      return list.includes(`[listening: 127.0.0.1:${port}]`) ? list : null
    })
    expect(listed).toMatch(new RegExp(`^${id}  running .* web  \\[listening: 127\\.0\\.0\\.1:${port}\\]$`))
    const read = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id } })
    expect(textOf(read)).toMatch(new RegExp(`^task ${id} \\(web\\): running \\[listening: 127\\.0\\.0\\.1:${port}\\]; bytes `))
    await callTool(shared.host, agent, { name: 'task_kill', arguments: { task_id: id } })
  })

  test('port only takes "auto"', async () => {
    const result = await callTool(shared.host, new TestAgent('servers-2'), { name: 'bash', arguments: { command: 'true', port: '3000' } })
    expect(result.isError).toBe(true)
    expect(textOf(result)).toContain('arguments.port: expected one of "auto"')
  })

  test('ready: {pattern} returns once the server prints its line, with the line and the output so far; one notice follows its end', async () => {
    const agent = new TestAgent('servers-3')
    const started = await callTool(shared.host, agent, {
      name: 'bash',
      arguments: {
        command: 'echo booting; exec python3 -u -m http.server "$PORT" --bind 127.0.0.1',
        description: 'web',
        run_in_background: true,
        port: 'auto',
        ready: { pattern: 'Serving HTTP on', timeout_ms: 30_000 },
      },
    })
    const text = textOf(started)
    expect(started.isError, text).toBe(false)
    const id = idIn(text)
    const port = /It was given port (\d+) as PORT\./.exec(text)![1]
    expect(text).toContain(`\nbooting\nServing HTTP on 127.0.0.1 port ${port} (http://127.0.0.1:${port}/) ...\n`)
    expect(text).toMatch(
      new RegExp(`\\[ready after [0-9.]+ (ms|s): the line "Serving HTTP on 127\\.0\\.0\\.1 port ${port} [^"]*" matched; it goes on in the background\\. `),
    )
    // The output so far was read: task_output goes on after it.
    const next = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id } })
    expect(textOf(next)).toContain('(no new output)')
    await shared.daemon.client.kill(id)
    await waitFor('the end notice', () => agent.notices().some((notice) => notice.startsWith(`background task ${id} (web) finished [status: killed`)))
    expect(agent.notices().filter((notice) => notice.includes(id))).toHaveLength(1)
  })

  test('ready: {port} and {url} hold once the server listens and answers', async () => {
    const agent = new TestAgent('servers-4')
    const serve = async (ready: (port: number) => Record<string, unknown>) => {
      const port = await freePort()
      const result = await callTool(shared.host, agent, {
        name: 'bash',
        arguments: { command: `sleep 0.3; exec python3 -m http.server ${port} --bind 127.0.0.1`, run_in_background: true, ready: ready(port) },
      })
      return { port, text: textOf(result) }
    }
    const byPort = await serve((port) => ({ port }))
    expect(byPort.text).toMatch(new RegExp(`\\[ready after [0-9.]+ (ms|s): something listens on port ${byPort.port}; it goes on in the background\\. `))
    const byUrl = await serve((port) => ({ url: `http://127.0.0.1:${port}/` }))
    expect(byUrl.text).toMatch(new RegExp(`\\[ready after [0-9.]+ (ms|s): http://127\\.0\\.0\\.1:${byUrl.port}/ answered; it goes on in the background\\. `))
    for (const { text } of [byPort, byUrl]) await callTool(shared.host, agent, { name: 'task_kill', arguments: { task_id: idIn(text) } })
  })

  test('a start waiting on a port another of its tasks already serves is warned, naming that task', async () => {
    const agent = new TestAgent('servers-8')
    const first = textOf(
      await callTool(shared.host, agent, {
        name: 'bash',
        arguments: {
          command: 'exec python3 -u -m http.server "$PORT" --bind 127.0.0.1',
          description: 'first server',
          run_in_background: true,
          port: 'auto',
          ready: { pattern: 'Serving HTTP on' },
        },
      }),
    )
    const port = /It was given port (\d+) as PORT\./.exec(first)![1]
    const served = await waitFor('the first server to be listed listening', async () =>
      (await shared.daemon.client.get(idIn(first))).ports?.length ? true : null,
    )
    expect(served).toBe(true)
    const second = await callTool(shared.host, agent, {
      name: 'bash',
      arguments: { command: 'sleep 30', description: 'second server', run_in_background: true, ready: { port: Number(port), timeout_ms: 1000 } },
    })
    expect(textOf(second)).toMatch(new RegExp(`\\n\\[warning: port ${port} is already served by task ${idIn(first)} \\(first server\\), started [^\\]]*\\]$`))
    for (const text of [first, textOf(second)]) await callTool(shared.host, agent, { name: 'task_kill', arguments: { task_id: idIn(text) } })
  })

  test('a pattern that never comes: the call returns at the timeout, saying so, with the output; the task still runs', async () => {
    const agent = new TestAgent('servers-5')
    const result = await callTool(shared.host, agent, {
      name: 'bash',
      arguments: { command: 'echo starting; sleep 60', description: 'stuck', run_in_background: true, ready: { pattern: 'never', timeout_ms: 500 } },
    })
    const text = textOf(result)
    const id = idIn(text)
    expect(text).toContain('\nstarting\n[not ready: no line matched /never/ within 500 ms; the task still runs: stop it with task_kill')
    expect((await shared.daemon.client.get(id)).state).toBe('running')
    await callTool(shared.host, agent, { name: 'task_kill', arguments: { task_id: id } })
  })

  test('a task that ends before it is ready: why, its output and its ending; no notice follows', async () => {
    const agent = new TestAgent('servers-6')
    const result = await callTool(shared.host, agent, {
      name: 'bash',
      arguments: { command: 'echo "address in use" >&2; exit 2', description: 'fails', run_in_background: true, ready: { pattern: 'Serving' } },
    })
    const text = textOf(result)
    const id = idIn(text)
    expect(text).toContain('\naddress in use\n[not ready: the task ended first]\n[exit code: 2]')
    await callTool(shared.host, agent, { name: 'task_list', arguments: {} })
    expect(agent.notices().filter((notice) => notice.includes(id))).toEqual([])
  })

  test('ready needs run_in_background and exactly one condition', async () => {
    const agent = new TestAgent('servers-7')
    const call = (args: Record<string, unknown>) => callTool(shared.host, agent, { name: 'bash', arguments: { command: 'true', ...args } })
    expect(textOf(await call({ ready: { pattern: 'x' } }))).toBe('ready needs run_in_background: true (a foreground command is waited for anyway)')
    expect(textOf(await call({ run_in_background: true, ready: {} }))).toBe('ready needs exactly one of pattern, port and url, got none')
    expect(textOf(await call({ run_in_background: true, ready: { pattern: 'x', port: 80 } }))).toBe(
      'ready needs exactly one of pattern, port and url, got pattern and port',
    )
    expect(await shared.daemon.client.list({ owner: 'servers-7', all: true })).toEqual([])
  })
})
