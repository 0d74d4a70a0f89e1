import { describe, expect, test } from 'vitest'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pluginPerFile } from '../harness/plugin-per-file.js'
import { callTool, TestAgent, textOf } from '../harness/host.js'
import { textWithCost } from '../helpers/cost-line.js'
import { waitFor } from '../helpers/wait-for.js'

const shared = pluginPerFile('tools', { outputBudgetBytes: 2000 })

const idIn = (text: string) => /Started background task ([0-9a-z]{12})/.exec(text)![1]!

describe('argument validation', () => {
  test('a missing required argument is rejected before execute, naming the path', async () => {
    const result = await callTool(shared.host, new TestAgent('args-1'), { name: 'bash', arguments: { description: 'x' } })
    expect(result).toMatchObject({ isError: true })
    expect(textOf(result)).toBe('invalid arguments for bash: arguments.command: is required')
    expect(await shared.daemon.client.list({ owner: 'args-1', all: true })).toEqual([])
  })

  test('wrong types, enum values and unknown properties are rejected, naming the path', async () => {
    const agent = new TestAgent('args-2')
    expect(textOf(await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'true', timeout: '5' } }))).toBe(
      'invalid arguments for bash: arguments.timeout: expected a number, got string "5"',
    )
    expect(textOf(await callTool(shared.host, agent, { name: 'task_kill', arguments: { task_id: 'abc', signal: 'BOGUS' } }))).toContain(
      'arguments.signal: expected one of "TERM"',
    )
    expect(textOf(await callTool(shared.host, agent, { name: 'task_list', arguments: { verbose: true } }))).toBe(
      'invalid arguments for task_list: arguments.verbose: unknown property (expected one of: )',
    )
  })

  test('a bad filter pattern and an empty command are clear errors', async () => {
    const agent = new TestAgent('args-3')
    const started = await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'echo x', run_in_background: true } })
    const bad = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: idIn(textOf(started)), filter: '(' } })
    expect(bad.isError).toBe(true)
    expect(textOf(bad)).toMatch(/^filter is not a valid regular expression: /)
    expect(textOf(await callTool(shared.host, agent, { name: 'bash', arguments: { command: '   ' } }))).toBe('command is empty')
  })
})

describe('bash results', () => {
  test('exit 0 returns the output and [exit code: 0]', async () => {
    const result = await callTool(shared.host, new TestAgent('bash-1'), { name: 'bash', arguments: { command: 'echo hello' } })
    expect(result).toMatchObject({
      isError: false,
      content: [{ type: 'text', text: expect.stringMatching(textWithCost('hello\n[exit code: 0]', 'exited 0')) }],
    })
  })

  test('a non-zero exit is reported in the text, not as an error', async () => {
    const result = await callTool(shared.host, new TestAgent('bash-2'), { name: 'bash', arguments: { command: 'echo oops >&2; exit 9' } })
    expect(result).toMatchObject({ isError: false, content: [{ type: 'text', text: expect.stringMatching(textWithCost('oops\n[exit code: 9]', 'exited 9')) }] })
  })

  test('a timeout stops the task and says so', async () => {
    const result = await callTool(shared.host, new TestAgent('bash-3'), { name: 'bash', arguments: { command: 'echo start; sleep 30', timeout: 300 } })
    expect(result.isError).toBe(false)
    expect(textOf(result)).toMatch(textWithCost('start\n[timed out after 300ms; the task was stopped with SIGTERM; stopped by: timeout]', 'timed out'))
  })

  test('a foreground task killed from outside says it was killed', async () => {
    const agent = new TestAgent('bash-4')
    const call = callTool(shared.host, agent, { name: 'bash', arguments: { command: 'echo waiting; sleep 30' } })
    const [task] = await waitFor('the foreground task to run', async () => {
      const tasks = await shared.daemon.client.list({ owner: 'bash-4' })
      return tasks.length === 1 && tasks[0]!.state === 'running' ? tasks : undefined
    })
    await shared.daemon.client.kill(task!.id, { reason: 'operator' })
    expect(textOf(await call)).toMatch(
      textWithCost('waiting\n[killed: killed by request (SIGTERM): operator; signal: SIGTERM; stopped by: operator]', 'killed by SIGTERM'),
    )
  })

  test('a command that cannot start is an error naming why', async () => {
    const result = await callTool(shared.host, new TestAgent('bash-5'), { name: 'bash', arguments: { command: 'true', cwd: '/nonexistent/tend' } })
    expect(result).toMatchObject({
      isError: true,
      content: [{ type: 'text', text: 'the command could not be started: cwd does not exist: /nonexistent/tend' }],
    })
  })

  test('output longer than the budget keeps head and tail and says how to read the rest', async () => {
    const result = await callTool(shared.host, new TestAgent('bash-6'), {
      name: 'bash',
      arguments: { command: 'i=1; while [ $i -le 2000 ]; do echo "line $i"; i=$((i+1)); done; echo "ERROR: the end" >&2; exit 1' },
    })
    const text = textOf(result)
    const [task] = await shared.daemon.client.list({ owner: 'bash-6', all: true })
    expect(text.startsWith('line 1\nline 2\n')).toBe(true)
    expect(text.slice(text.lastIndexOf('\nline 2000\n') + 1)).toMatch(textWithCost('line 2000\nERROR: the end\n[exit code: 1]', 'exited 1'))
    expect(text).toMatch(new RegExp(`\\[… \\d+ bytes omitted \\(bytes (\\d+)–\\d+\\); read them with task_output \\(task_id: "${task!.id}", from: \\1\\) …\\]`))
    expect(Buffer.byteLength(text)).toBeLessThan(2200)
  })

  test('a background start returns at once with the id and how to read it', async () => {
    const agent = new TestAgent('bash-7')
    const result = await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'sleep 30', run_in_background: true, description: 'long sleep' } })
    const id = idIn(textOf(result))
    expect(textOf(result)).toBe(
      `Started background task ${id} (long sleep).\nRead its output with task_output (task_id: "${id}"); stop it with task_kill. A notice arrives when it finishes.`,
    )
    await waitFor('the background task to run', async () => (await shared.daemon.client.get(id)).state === 'running')
    const killed = await callTool(shared.host, agent, { name: 'task_kill', arguments: { task_id: id, reason: 'done with it' } })
    expect(textOf(killed)).toMatch(
      textWithCost(
        `task ${id} (long sleep) is killed (signal: SIGTERM, stopped by: owner); no process of it is left. Reason: killed by request (SIGTERM): done with it.`,
        'killed by SIGTERM',
      ),
    )
  })
})

describe('task_output', () => {
  test('without from it returns only what this agent has not seen; from re-reads without moving the cursor', async () => {
    const agent = new TestAgent('output-1')
    const gate = mkdtempSync(join(shared.workspace, 'gate-'))
    const started = await callTool(shared.host, agent, {
      name: 'bash',
      arguments: { command: `echo one; while [ ! -e ${gate}/go ]; do sleep 0.01; done; echo two`, run_in_background: true },
    })
    const id = idIn(textOf(started))
    const first = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, wait_ms: 10_000 } })
    expect(textOf(first)).toContain('bytes 0–4 of 4\none\n[still running')
    writeFileSync(join(gate, 'go'), '')
    const second = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, wait_ms: 10_000 } })
    expect(textOf(second)).toMatch(/bytes 4–8 of 8\ntwo\n/)
    const again = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, from: 0 } })
    expect(textOf(again)).toContain('one\ntwo')
    await shared.daemon.client.wait(id)
    const last = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id } })
    expect(textOf(last)).toContain('bytes 8–8 of 8\n(no new output)\n[exit code: 0]')
  })

  test('filter keeps matching lines only', async () => {
    const agent = new TestAgent('output-2')
    const started = await callTool(shared.host, agent, {
      name: 'bash',
      arguments: { command: 'echo ok 1; echo FAIL a; echo ok 2; echo FAIL b', run_in_background: true },
    })
    const id = idIn(textOf(started))
    await shared.daemon.client.wait(id)
    const result = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, filter: '^FAIL' } })
    expect(textOf(result)).toContain('[filter /^FAIL/: 2 matching lines]\nFAIL a\nFAIL b\n[exit code: 0]')
  })
})

describe('task_list', () => {
  test('lists only this agent’s tasks with state, exit and label', async () => {
    const agent = new TestAgent('list-1')
    await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'exit 4', description: 'four' } })
    await callTool(shared.host, new TestAgent('list-2'), { name: 'bash', arguments: { command: 'true', description: 'other agent' } })
    const text = textOf(await callTool(shared.host, agent, { name: 'task_list', arguments: {} }))
    expect(text).toMatch(/^[0-9a-z]{12} {2}exited {5}exit 4 /)
    expect(text).toContain('four')
    expect(text).not.toContain('other agent')
  })
})
