import { beforeAll, describe, expect, test } from 'vitest'
import { chmodSync } from 'node:fs'
import { callTool, TestAgent, textOf } from '../harness/host.js'
import { pluginPerFile } from '../harness/plugin-per-file.js'
import { sandboxedCwd } from '../helpers/daemon-per-file.js'

/*
 * The agent's sandbox hint comes only with a failure the sandbox plausibly caused (a refusal in
 * the end of the output it was shown), in the bash tool's terms: never a CLI flag.
 */

const shared = pluginPerFile('tools-sandbox-hint', {}, { env: { TEND_SANDBOX: 'workspace' } })

beforeAll(() => {
  // A root daemon's tasks run on a uid of their own, which must reach their cwd.
  chmodSync(shared.workspace, 0o711)
})

async function bash(agent: string, command: string): Promise<string> {
  const cwd = sandboxedCwd(shared)
  return textOf(await callTool(shared.host, new TestAgent(agent), { name: 'bash', arguments: { command, cwd } }))
}

describe("the bash tool's sandbox hint", () => {
  test('a command that fails on its own (echo hi; exit 3) gets none', async () => {
    const text = await bash('hint-plain', 'echo hi; exit 3')
    expect(text).toContain('[exit code: 3]')
    expect(text).not.toContain('ran in sandbox')
  })

  test("a write the read-only file system refused (touch /usr/x) gets it, in the tool's terms", async () => {
    const text = await bash('hint-usr', 'touch /usr/tend-hint-probe')
    expect(text).toContain('Read-only file system')
    expect(text).toContain('[ran in sandbox workspace: it could write only')
    expect(text).toContain('only the operator can give')
    expect(text).not.toMatch(/--[a-z]/)
  })

  test('a write to a folder outside the writable places gets it', async () => {
    const text = await bash('hint-outside', 'echo x > /var/tmp/tend-tools-hint-outside-probe; exit 1')
    expect(text).toContain('[ran in sandbox workspace: it could write only')
  })
})
