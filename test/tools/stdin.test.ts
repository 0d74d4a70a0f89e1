import { describe, expect, test } from 'vitest'
import { pluginPerFile } from '../harness/plugin-per-file.js'
import { callTool, TestAgent, textOf } from '../harness/host.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'

/**
 * stdin through the agent tools: bash with stdin: true starts a task with a pipe, task_input writes
 * to it and answers the output that came since the agent's place, as task_output would.
 */

const shared = pluginPerFile('tools-stdin')

const startedId = (text: string) => {
  const match = /Started background task ([0-9a-z]{12})/.exec(text) ?? /background task ([0-9a-z]{12}) /.exec(text)
  if (!match) throw new Error(`no task id in: ${text}`)
  return match[1]!
}
const liveProcessesOf = (taskId: string) => processesWithEnv(`TEND_TASK_ID=${taskId}`).filter(isAlive)

describe('a Python REPL driven through bash (stdin: true) and task_input', () => {
  test('in the background: define a variable, print it, exit; the ending is shown and no notice follows', async () => {
    const agent = new TestAgent('repl-background')
    const started = await callTool(shared.host, agent, {
      name: 'bash',
      arguments: { command: 'python3 -u -i -q', description: 'python repl', run_in_background: true, stdin: true, cwd: shared.workspace },
    })
    expect(started.isError, textOf(started)).toBe(false)
    const id = startedId(textOf(started))

    const define = await callTool(shared.host, agent, { name: 'task_input', arguments: { task_id: id, text: 'x = 6 * 7\n' } })
    expect(define.isError, textOf(define)).toBe(false)
    expect(textOf(define)).toMatch(new RegExp(`^sent 10 bytes to the stdin of task ${id}\ntask ${id} \\(python repl\\): running; bytes 0–\\d+ of \\d+\n`))

    const printed = await callTool(shared.host, agent, { name: 'task_input', arguments: { task_id: id, text: 'print(x)\n', yield_ms: 5000 } })
    expect(textOf(printed)).toContain('42')

    const exited = await callTool(shared.host, agent, { name: 'task_input', arguments: { task_id: id, text: 'exit()\n', yield_ms: 10_000 } })
    expect(textOf(exited)).toMatch(/: exited; bytes \d+–\d+ of \d+\n/)
    expect(textOf(exited)).toContain('[exit code: 0]')
    expect((await shared.daemon.client.get(id)).state).toBe('exited')
    expect(liveProcessesOf(id)).toEqual([])
    expect(agent.notices().filter((notice) => notice.includes(id))).toEqual([])
  })

  test('in the foreground with yield_ms: the REPL yields, then task_input drives it and eof ends it', async () => {
    const agent = new TestAgent('repl-yield')
    const started = await callTool(shared.host, agent, {
      name: 'bash',
      arguments: { command: 'python3 -u -i -q', description: 'repl', yield_ms: 1000, stdin: true, cwd: shared.workspace },
    })
    expect(textOf(started)).toContain('still running after 1000ms')
    const id = startedId(textOf(started))
    await callTool(shared.host, agent, { name: 'task_input', arguments: { task_id: id, text: 'name = "tend"\n' } })
    const shown = await callTool(shared.host, agent, { name: 'task_input', arguments: { task_id: id, text: 'print(name.upper())\n', yield_ms: 5000 } })
    expect(textOf(shown)).toContain('TEND')
    const ended = await callTool(shared.host, agent, { name: 'task_input', arguments: { task_id: id, text: '', eof: true, yield_ms: 10_000 } })
    expect(textOf(ended)).toContain(`sent 0 bytes to the stdin of task ${id}, then closed it (end of input)`)
    expect(textOf(ended)).toContain('[exit code: 0]')
  })

  test('task_input to a task without stdin, and with neither text nor eof, is an error the model can read', async () => {
    const agent = new TestAgent('repl-errors')
    const started = await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'sleep 30', run_in_background: true, cwd: shared.workspace } })
    const id = startedId(textOf(started))
    const refused = await callTool(shared.host, agent, { name: 'task_input', arguments: { task_id: id, text: 'x\n' } })
    expect(refused.isError).toBe(true)
    expect(textOf(refused)).toContain(`task ${id} has no stdin pipe`)
    const empty = await callTool(shared.host, agent, { name: 'task_input', arguments: { task_id: id, text: '' } })
    expect(empty.isError).toBe(true)
    expect(textOf(empty)).toContain('text is empty')
    await callTool(shared.host, agent, { name: 'task_kill', arguments: { task_id: id } })
  })
})

describe('bash describes stdin', () => {
  test('bash has a stdin parameter and task_input is registered with its description', () => {
    const bash = shared.host.tools.tools.get('bash')!
    expect(bash.inputSchema).toMatchObject({ properties: { stdin: { type: 'boolean' } } })
    const input = shared.host.tools.tools.get('task_input')!
    expect(input.description).toContain('Write text to the stdin of a task started with bash stdin: true')
    expect(input.inputSchema).toMatchObject({ required: ['task_id', 'text'], additionalProperties: false })
  })
})
