import { describe, expect, test } from 'vitest'
import { pluginPerFile } from '../harness/plugin-per-file.js'
import { callTool, TestAgent, textOf } from '../harness/host.js'
import { waitFor } from '../helpers/wait-for.js'

const shared = pluginPerFile('servers')

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
})
