import { spawn } from 'node:child_process'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { expect } from 'vitest'
import { TendClient } from '../../client/index.js'
import type { NetworkDecision } from '../../protocol/index.js'
import { createTempHome, daemonEnv, FIXTURES, killEverythingOf } from './test-daemon.js'
import { waitFor } from './wait-for.js'

const DAEMON_START_TIMEOUT_MS = 30_000

/** A real daemon (test/fixtures/network-ledger-daemon.mjs) whose network ledger a test feeds, as the egress proxy does. */
export interface LedgerDaemon {
  home: string
  env: Record<string, string>
  client: TendClient
  /** Records the decisions (the list `repeat` times over); `kill`: the task is killed right after the last one. */
  feed: (id: string, decisions: NetworkDecision[], options?: { repeat?: number; kill?: boolean }) => Promise<void>
  /** Stops the daemon, kills anything of its home left, and deletes the home. */
  stop: () => Promise<void>
}

export async function startLedgerDaemon(extraEnv: Record<string, string> = {}): Promise<LedgerDaemon> {
  const home = createTempHome()
  const env = daemonEnv(home, extraEnv)
  const child = spawn(process.execPath, [join(FIXTURES, 'network-ledger-daemon.mjs')], { env, stdio: ['pipe', 'pipe', 'pipe'] })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const answers: string[] = []
  let rest = ''
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = (rest + chunk.toString()).split('\n')
    rest = lines.pop()!
    answers.push(...lines)
  })
  const client = new TendClient({ home, autoStart: false })
  const stop = async () => {
    client.close()
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    await exited
    await killEverythingOf(home)
    rmSync(home, { recursive: true, force: true })
  }
  try {
    await waitFor(
      `the ledger daemon on ${home} to be ready`,
      () => {
        if (child.exitCode !== null) throw new Error(`it exited with ${child.exitCode}: ${stderr}`)
        return answers[0] === '{"ready":true}'
      },
      DAEMON_START_TIMEOUT_MS,
    )
  } catch (error) {
    await stop()
    throw error
  }
  answers.shift()
  const feed = async (id: string, decisions: NetworkDecision[], options: { repeat?: number; kill?: boolean } = {}) => {
    child.stdin!.write(`${JSON.stringify({ id, decisions, ...options })}\n`)
    const line = await waitFor('the ledger daemon to answer', () => answers.shift())
    expect(JSON.parse(line)).toEqual({ ok: true })
  }
  return { home, env, client, feed, stop }
}
