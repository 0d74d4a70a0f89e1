import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, beforeAll, expect, test } from 'vitest'
import type { Message } from '@deepseek-ai/dsh-llm'
import { createHarness, INTEGRATION_DIR, say } from './support/harness.js'
import { startTestDaemon, textWithCost, type TestDaemon } from './support/daemon.js'
import { toolCalls } from './support/session.js'
import type * as TendDsh from '../../../dist/tools/dsh/index.js'

const REPO_ROOT = join(INTEGRATION_DIR, '..', '..')

let daemon: TestDaemon
let project: string
let elsewhere: string
const startedIn = process.cwd()

/**
 * A harness user's project: tend installed in node_modules next to the harness packages. tend's
 * package.json and dist are copied (a symlink would make Node resolve from tend's checkout); its
 * own dependencies and the harness packages are linked in.
 */
function createProject(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tend-dsh-project-'))
  const tend = join(dir, 'node_modules', 'tend')
  mkdirSync(tend, { recursive: true })
  cpSync(join(REPO_ROOT, 'package.json'), join(tend, 'package.json'))
  cpSync(join(REPO_ROOT, 'dist'), join(tend, 'dist'), { recursive: true })
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(tend, 'node_modules'))
  symlinkSync(join(INTEGRATION_DIR, 'node_modules', '@deepseek-ai'), join(dir, 'node_modules', '@deepseek-ai'))
  return dir
}

beforeAll(async () => {
  daemon = await startTestDaemon()
  project = createProject()
  // Not this folder, whose node_modules has the harness: the plugin must find it beside tend.
  elsewhere = mkdtempSync(join(tmpdir(), 'tend-dsh-cwd-'))
  process.chdir(elsewhere)
})
afterAll(async () => {
  process.chdir(startedIn)
  await daemon?.stop()
  for (const dir of [project, elsewhere]) if (dir) rmSync(dir, { recursive: true, force: true })
})

test('installed beside the harness, the plugin entry `tend/dsh` loads with no harnessFrom and runs a command', async () => {
  const entry = createRequire(join(project, 'index.js')).resolve('tend/dsh')
  expect(entry).toBe(join(project, 'node_modules', 'tend', 'dist', 'tools', 'dsh', 'index.js'))
  const plugin = (await import(pathToFileURL(entry).href)) as typeof TendDsh
  expect([plugin.name, plugin.inject]).toEqual(['tend', ['tools']])

  const harness = await createHarness()
  const fiber = harness.root.plugin(plugin, { home: daemon.home })
  await fiber
  const agent = harness.createAgent('packaged', (last: Message) => (last.source.kind === 'user' ? { calls: [{ name: 'bash', args: { command: 'echo installed' } }] } : { text: 'done' }))
  say(agent, 'go')
  await agent.whenIdle()
  expect(toolCalls(agent).map((call) => call.text)).toEqual([expect.stringMatching(textWithCost('installed\n[exit code: 0]', 'exited 0'))])
  await fiber.dispose()
  await harness.dispose()
})
