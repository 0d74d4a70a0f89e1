import { describe, expect, test } from 'vitest'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pluginPerFile } from '../harness/plugin-per-file.js'
import { callTool, TestAgent, textOf } from '../harness/host.js'
import { waitFor } from '../helpers/wait-for.js'

const shared = pluginPerFile('after')

const idIn = (text: string) => /Started background task ([0-9a-z]{12})/.exec(text)![1]!

describe('bash after: a command that waits for others to end', () => {
  test('it stays queued until they end, starts when all exited 0, and the result says what it waits for', async () => {
    const agent = new TestAgent('after-1')
    const gate = mkdtempSync(join(shared.workspace, 'gate-'))
    const build = idIn(
      textOf(
        await callTool(shared.host, agent, {
          name: 'bash',
          arguments: { command: `until [ -e ${gate}/go ]; do sleep 0.01; done`, description: 'build', run_in_background: true },
        }),
      ),
    )
    const queued = await callTool(shared.host, agent, {
      name: 'bash',
      arguments: { command: 'echo tests ran', description: 'tests', run_in_background: true, after: [build] },
    })
    const text = textOf(queued)
    expect(text).toMatch(new RegExp(`^Started background task [0-9a-z]{12} \\(tests\\)\\. It waits for task ${build} to end and starts if it exited 0\\.\\n`))
    const tests = idIn(text)
    expect((await shared.daemon.client.get(tests)).state).toBe('queued')
    writeFileSync(join(gate, 'go'), '')
    const done = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: tests, wait_ms: 30_000 } })
    expect(textOf(done)).toContain('tests ran\n')
  })

  test('a dependency that fails ends it failed, naming the dependency, in its notice', async () => {
    const agent = new TestAgent('after-2')
    const build = idIn(
      textOf(await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'exit 2', description: 'build', run_in_background: true } })),
    )
    const tests = idIn(
      textOf(
        await callTool(shared.host, agent, {
          name: 'bash',
          arguments: { command: 'echo never', description: 'tests', run_in_background: true, after: [build] },
        }),
      ),
    )
    const notice = await waitFor('the notice of tests', () => agent.notices().find((each) => each.includes(tests)))
    expect(notice).toContain(`background task ${tests} (tests) finished [status: failed, exit code: none]`)
    const read = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: tests } })
    expect(textOf(read)).toContain(`[failed: dependency ${build} exited 2]`)
  })

  test('after takes task ids, and nothing runs otherwise', async () => {
    const result = await callTool(shared.host, new TestAgent('after-3'), {
      name: 'bash',
      arguments: { command: 'true', run_in_background: true, after: ['nope'] },
    })
    expect(result.isError).toBe(true)
    expect(await shared.daemon.client.list({ owner: 'after-3', all: true })).toEqual([])
    expect(textOf(result)).toBe('after must list task ids (12 lowercase letters or digits, as bash returned them), got "nope"')
  })
})
