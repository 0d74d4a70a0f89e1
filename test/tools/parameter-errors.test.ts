import { beforeAll, describe, expect, test } from 'vitest'
import { chmodSync } from 'node:fs'
import { callTool, TestAgent, textOf } from '../harness/host.js'
import { pluginPerFile } from '../harness/plugin-per-file.js'

/*
 * A request the daemon refuses reaches the agent in the tool's terms: the parameter it passed
 * (cwd, after[0], ready.pattern), never the API's field (body/cwd, body/after/0).
 */

const shared = pluginPerFile('tools-parameter-errors', {}, { env: { TEND_SANDBOX: 'workspace' } })

beforeAll(() => {
  // A root daemon's tasks run on a uid of their own, which must reach their cwd.
  chmodSync(shared.workspace, 0o711)
})

const refusal = async (agent: string, args: Record<string, unknown>) => {
  const result = await callTool(shared.host, new TestAgent(agent), { name: 'bash', arguments: args })
  expect(result.isError).toBe(true)
  const text = textOf(result)
  expect(text).not.toContain('body/')
  return text
}

describe('a refused bash call names the parameter', () => {
  test('a cwd the sandbox cannot take names cwd and says which folder to pass', async () => {
    const text = await refusal('param-cwd', { command: 'true', cwd: '/' })
    expect(text).toMatch(/^the task was refused: cwd: under sandbox workspace \/ would become writable/)
    expect(text).toContain('pass cwd: the absolute path of the project folder you work in')
    expect(text).not.toContain('sandbox off')
  })

  test('an after entry that is no task names after[0]', async () => {
    const text = await refusal('param-after', { command: 'true', run_in_background: true, after: ['aaaaaaaaaaaa'] })
    expect(text).toMatch(/^the task was refused: after\[0\]: no task aaaaaaaaaaaa/)
  })

  test('a ready pattern RE2 cannot take names ready.pattern', async () => {
    const text = await refusal('param-ready', { command: 'true', cwd: shared.workspace, run_in_background: true, ready: { pattern: '(a)\\1' } })
    expect(text).toMatch(/^the task was refused: ready\.pattern: /)
  })
})
