import { execa } from 'execa'
import { expect } from 'vitest'
import { TEND_BIN } from './test-daemon.js'

export interface CliResult {
  exitCode: number
  stdout: string
  stderr: string
}

/** Runs the real `tend` executable with `env` (give it TEND_HOME) and collects what it printed. */
export async function runCli(args: string[], env: Record<string, string>, options: { timeoutMs?: number } = {}): Promise<CliResult> {
  const result = await execa(process.execPath, [TEND_BIN, ...args], {
    env,
    extendEnv: false,
    reject: false,
    stdin: 'ignore',
    timeout: options.timeoutMs ?? 30_000,
    stripFinalNewline: false,
  })
  return { exitCode: result.exitCode ?? -1, stdout: String(result.stdout), stderr: String(result.stderr) }
}

/** `tend run --json ARGS…` through the real CLI: it must succeed; answers the new task's id. */
export async function cliRunId(env: Record<string, string>, ...args: string[]): Promise<string> {
  const started = await runCli(['run', '--json', ...args], env)
  expect(started.exitCode, started.stderr).toBe(0)
  return (JSON.parse(started.stdout) as { id: string }).id
}
