import { describe, expect, test } from 'vitest'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pluginPerFile } from '../harness/plugin-per-file.js'
import { callTool, TestAgent, textOf } from '../harness/host.js'
import { waitFor } from '../helpers/wait-for.js'

const shared = pluginPerFile('wait-for')

const idIn = (text: string) => /Started background task ([0-9a-z]{12})/.exec(text)![1]!

async function startBackground(agent: TestAgent, command: string): Promise<string> {
  return idIn(textOf(await callTool(shared.host, agent, { name: 'bash', arguments: { command, run_in_background: true } })))
}

describe('task_output with wait_for', () => {
  test('returns at the first new line that matches, not at the first new byte, with the output up to and including it', async () => {
    const agent = new TestAgent('wait-for-1')
    const gate = mkdtempSync(join(shared.workspace, 'gate-'))
    const id = await startBackground(agent, `echo booting; while [ ! -e ${gate}/go ]; do sleep 0.01; done; echo 'listening on 8000'; echo after`)
    await waitFor('the first line', async () => (await shared.daemon.client.read(id)).data === 'booting\n')
    const call = callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, wait_for: 'listening on \\d+', wait_ms: 60_000 } })
    const pending = Symbol('pending')
    expect(await Promise.race([call, new Promise((resolve) => setTimeout(() => resolve(pending), 100))])).toBe(pending)
    writeFileSync(join(gate, 'go'), '')
    const text = textOf(await call)
    expect(text).toMatch(new RegExp(`^task ${id} \\(.*\\): (running|exited); bytes 0–26 of \\d+\\n`))
    expect(text).toContain('[wait_for /listening on \\d+/: matched the line "listening on 8000"]\nbooting\nlistening on 8000\n[')
    expect(text).not.toMatch(/^after$/m)
    await shared.daemon.client.wait(id)
    expect(textOf(await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id } }))).toContain(
      'bytes 26–32 of 32\nafter\n[exit code: 0]',
    )
  })

  test('when wait_ms runs out it returns what came and says that no line matched', async () => {
    const agent = new TestAgent('wait-for-2')
    const id = await startBackground(agent, 'echo one; echo two; sleep 30')
    await waitFor('both lines', async () => (await shared.daemon.client.read(id)).data === 'one\ntwo\n')
    const text = textOf(await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, wait_for: 'three', wait_ms: 300 } }))
    expect(text).toContain('[wait_for /three/: no new line matched in 300 ms]\none\ntwo\n[still running')
    await callTool(shared.host, agent, { name: 'task_kill', arguments: { task_id: id } })
  })

  test('a task that ends without the line: its output and its end, and that no line matched', async () => {
    const agent = new TestAgent('wait-for-3')
    const id = await startBackground(agent, 'echo one; exit 3')
    const text = textOf(await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, wait_for: 'three', wait_ms: 60_000 } }))
    expect(text).toContain('[wait_for /three/: the task ended without a matching line]\none\n[exit code: 3]')
  })

  test('a pattern RE2 cannot take, wait_for without wait_ms, and wait_for with filter are clear errors', async () => {
    const agent = new TestAgent('wait-for-4')
    const id = await startBackground(agent, 'echo x')
    const call = (args: Record<string, unknown>) => callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, ...args } })
    const bad = await call({ wait_for: '(a)\\1', wait_ms: 1000 })
    expect(bad.isError).toBe(true)
    expect(textOf(bad)).toMatch(/^wait_for is not a regular expression tend can match \(RE2 syntax, no backreferences or lookaround\): /)
    expect(textOf(await call({ wait_for: 'x' }))).toBe('wait_for needs wait_ms: how long to wait for a matching line, in milliseconds')
    expect(textOf(await call({ wait_for: 'x', wait_ms: 1000, filter: 'x' }))).toBe('wait_for and filter cannot be combined: wait for the line, then filter')
  })
})
