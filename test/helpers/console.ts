import { expect } from 'vitest'
import type { ConsoleInfo } from '../../client/index.js'
import { runCli } from './cli.js'

/** `tend console --json --no-open` with more flags, through the real CLI: it must succeed; answers what it printed. */
export async function openConsole(env: Record<string, string>, ...args: string[]): Promise<ConsoleInfo> {
  const opened = await runCli(['console', '--json', '--no-open', ...args], env)
  expect(opened.exitCode, opened.stderr).toBe(0)
  return JSON.parse(opened.stdout) as ConsoleInfo
}
