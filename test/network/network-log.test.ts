import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { TendClient, type Task } from '../../client/index.js'
import { isTendError, NETWORK_LOG_MAX_BYTES, type NetworkDecision, type NetworkLogPage } from '../../protocol/index.js'
import { runCli } from '../helpers/cli.js'
import { startLedgerDaemon, type LedgerDaemon } from '../helpers/network-ledger-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * Every decision of the egress proxy is recorded per task: a JSON line in its network.log, its
 * counts in the record's networkUse (on the final record as soon as it is answered), read back
 * through GET /v1/tasks/:id/network, `tend network` and the client. The proxy is not in this
 * daemon yet: the decisions are fed to the real daemon's ledger, in its own process
 * (test/fixtures/network-ledger-daemon.mjs), exactly as the proxy calls it.
 */

const RECORD_TIMEOUT_MS = 5000

let daemon: LedgerDaemon
let home: string
let env: Record<string, string>
let client: TendClient

beforeAll(async () => {
  daemon = await startLedgerDaemon()
  ;({ home, env, client } = daemon)
}, 35_000)

afterAll(async () => {
  await daemon?.stop()
})

const feed = (id: string, decisions: NetworkDecision[], options?: { repeat?: number; kill?: boolean }) => daemon.feed(id, decisions, options)

function decision(fields: Partial<NetworkDecision> & Pick<NetworkDecision, 'name' | 'decision'>): NetworkDecision {
  return { time: new Date().toISOString(), port: 443, via: 'connect', sentBytes: 0, receivedBytes: 0, ...fields }
}

const allowed = decision({ name: 'registry.example', decision: 'allowed', address: '127.0.0.1', sentBytes: 300, receivedBytes: 7000 })
const refused = decision({ name: 'evil.example', decision: 'blocked', reason: 'not on the allowlist' })

/** A sandboxed task (its network is `loopback`, the proxy's side of it) that runs until killed. */
async function sleeper(options: { owner?: string } = {}): Promise<Task> {
  const task = await client.start({ command: ['sleep', '300'], sandbox: 'workspace', ...options })
  expect(task.network).toBe('loopback')
  return task
}

function logLines(id: string): string[] {
  return readFileSync(join(home, 'spool', id, 'network.log'), 'utf8')
    .split('\n')
    .filter((line) => line !== '')
}

async function readAll(id: string, limit: number): Promise<{ entries: NetworkDecision[]; last: NetworkLogPage }> {
  const entries: NetworkDecision[] = []
  let page = await client.networkLog(id, { from: 0, limit })
  entries.push(...page.entries)
  while (page.entries.length > 0) {
    page = await client.networkLog(id, { from: page.next, limit })
    entries.push(...page.entries)
  }
  return { entries, last: page }
}

describe('network.log and networkUse', () => {
  test('each decision is a line of network.log, counted in the running record, read back in order', async () => {
    const task = await sleeper()
    await feed(task.id, [allowed, refused, allowed, refused])
    // The record follows while the task runs (coalesced, not per decision).
    const running = await waitFor(
      'the running record to count the decisions',
      async () => {
        const now = await client.get(task.id)
        return now.networkUse?.allowed === 2 && now.state === 'running' ? now : undefined
      },
      RECORD_TIMEOUT_MS,
    )
    expect(running.state).toBe('running')
    expect(running.networkUse).toEqual({
      allowed: 2,
      blocked: 2,
      sentBytes: 600,
      receivedBytes: 14000,
      blockedDestinations: [{ name: 'evil.example', port: 443, reason: 'not on the allowlist', count: 2 }],
    })
    expect(logLines(task.id).map((line) => JSON.parse(line))).toEqual([allowed, refused, allowed, refused])

    const first = await client.networkLog(task.id, { limit: 3 })
    expect(first.entries).toEqual([allowed, refused, allowed])
    expect(first.done).toBe(false)
    const second = await client.networkLog(task.id, { from: first.next })
    expect(second).toEqual({ entries: [refused], next: readFileSync(join(home, 'spool', task.id, 'network.log')).length, done: false, omitted: 0, lost: 0 })

    await client.kill(task.id, { signal: 'SIGKILL', graceMs: 0 })
    const end = await client.networkLog(task.id, { from: second.next })
    expect(end).toMatchObject({ entries: [], done: true })
  })

  test('the final record carries every decision made up to the ending, as soon as it is answered', async () => {
    for (let round = 0; round < 3; round++) {
      const task = await sleeper()
      // Killed in the same breath as the decisions: well inside the record's coalescing interval.
      await feed(task.id, [refused, allowed, allowed], { repeat: 7, kill: true })
      const ended = await client.wait(task.id, { timeoutMs: 30_000 })
      expect(ended.state).toBe('killed')
      expect(ended.networkUse).toMatchObject({ allowed: 14, blocked: 7, sentBytes: 14 * 300, receivedBytes: 14 * 7000 })
      expect(JSON.parse(readFileSync(join(home, 'spool', task.id, 'task.json'), 'utf8')).networkUse).toEqual(ended.networkUse)
      expect(logLines(task.id)).toHaveLength(21)
    }
  })

  test('network.log stops at its cap with one line saying how many were left out; the counts stay exact', async () => {
    const task = await sleeper()
    // Some 300 bytes a line: the cap holds about 3500 of these.
    const long = decision({ name: `${'a'.repeat(200)}.example`, decision: 'allowed', sentBytes: 1, receivedBytes: 2 })
    const count = Math.ceil((NETWORK_LOG_MAX_BYTES / JSON.stringify(long).length) * 1.5)
    await feed(task.id, [long], { repeat: count, kill: true })
    const ended = await client.wait(task.id, { timeoutMs: 30_000 })
    const lines = logLines(task.id)
    const listed = lines.length - 1
    const omitted = count - listed
    expect(omitted).toBeGreaterThan(0)
    expect(ended.networkUse).toMatchObject({ allowed: count, sentBytes: count, receivedBytes: 2 * count, logOmitted: omitted })
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ omitted })
    const size = readFileSync(join(home, 'spool', task.id, 'network.log')).length
    expect(size - lines.at(-1)!.length - 1).toBeLessThanOrEqual(NETWORK_LOG_MAX_BYTES)
    const { entries, last } = await readAll(task.id, 1000)
    expect(entries).toHaveLength(listed)
    expect(last).toMatchObject({ done: true, omitted, lost: 0, next: size })
  })

  test('a network.log replaced by a link is never written through: its lines are counted lost, and reading it is refused', async () => {
    const task = await sleeper()
    const outside = mkdtempSync(join(tmpdir(), 'tend-network-target-'))
    try {
      const target = join(outside, 'target')
      writeFileSync(target, 'untouched\n')
      symlinkSync(target, join(home, 'spool', task.id, 'network.log'))
      await feed(task.id, [allowed, refused, refused])
      await client.kill(task.id, { signal: 'SIGKILL', graceMs: 0 })
      const ended = await client.wait(task.id, { timeoutMs: 30_000 })
      expect(ended.networkUse).toMatchObject({ allowed: 1, blocked: 2, logLost: 3 })
      expect(readFileSync(target, 'utf8')).toBe('untouched\n')
      const error = await client.networkLog(task.id).then(
        () => null,
        (thrown: unknown) => thrown,
      )
      expect(isTendError(error) && error.code).toBe('TEND_ERR_NETWORK_LOG_UNREADABLE')
      // The daemon goes on recording for others.
      const next = await sleeper()
      await feed(next.id, [allowed])
      await waitFor('the next task to be counted', async () => (await client.get(next.id)).networkUse?.allowed === 1, RECORD_TIMEOUT_MS)
      await client.kill(next.id, { signal: 'SIGKILL', graceMs: 0 })
    } finally {
      rmSync(outside, { recursive: true, force: true })
    }
  })

  test("another owner's task's log is not found; a host task's folder is not read", async () => {
    const task = await sleeper({ owner: 'agent-a' })
    await feed(task.id, [refused])
    const other = new TendClient({ home, autoStart: false, owner: 'agent-b' })
    try {
      const error = await other.networkLog(task.id).then(
        () => null,
        (thrown: unknown) => thrown,
      )
      expect(isTendError(error) && error.code).toBe('TEND_ERR_TASK_NOT_FOUND')
      const own = new TendClient({ home, autoStart: false, owner: 'agent-a' })
      try {
        await waitFor('the owner to read its log', async () => (await own.networkLog(task.id)).entries.length === 1, RECORD_TIMEOUT_MS)
      } finally {
        own.close()
      }
    } finally {
      other.close()
      await client.kill(task.id, { signal: 'SIGKILL', graceMs: 0 })
    }
    // Under sandbox off a task can write its own folder: a network.log there is not tend's.
    const host = await client.start({ command: ['sleep', '300'], sandbox: 'off' })
    expect(host.network).toBe('host')
    writeFileSync(join(home, 'spool', host.id, 'network.log'), `${JSON.stringify(refused)}\n`)
    expect((await client.networkLog(host.id)).entries).toEqual([])
    await client.kill(host.id, { signal: 'SIGKILL', graceMs: 0 })
  })

  test('tend network prints the log as a table (a name shown escaped), and --json as a page', async () => {
    const task = await sleeper()
    const trick = decision({ name: 'x\u001b[2Jy.example', decision: 'blocked', reason: 'not on the allowlist', port: 80, via: 'http' })
    await feed(task.id, [allowed, trick])
    await waitFor('both lines on disk', () => logLines(task.id).length === 2, RECORD_TIMEOUT_MS)
    const table = await runCli(['network', task.id], env)
    expect(table.exitCode, table.stderr).toBe(0)
    const rows = table.stdout.trimEnd().split('\n')
    expect(rows[0]).toMatch(/^TIME\s+DESTINATION\s+VIA\s+DECISION\s+SENT\s+RECEIVED$/)
    expect(rows[1]).toMatch(/registry\.example:443\s+connect\s+allowed\s+300B\s+6\.8K/)
    expect(rows[2]).toContain('x\\u001b[2Jy.example:80')
    expect(rows[2]).toContain('blocked: not on the allowlist')
    expect(table.stdout).not.toContain('\u001b')
    const json = await runCli(['network', task.id, '--json'], env)
    expect(json.exitCode, json.stderr).toBe(0)
    expect(JSON.parse(json.stdout)).toMatchObject({ entries: [allowed, trick], done: false, omitted: 0, lost: 0 })
    await client.kill(task.id, { signal: 'SIGKILL', graceMs: 0 })
    const show = await runCli(['show', task.id], env)
    expect(show.exitCode, show.stderr).toBe(0)
    expect(show.stdout).toContain('1 allowed, 1 blocked')
    expect(show.stdout).toContain('(not on the allowlist)')
    expect(show.stdout).not.toContain('\u001b')
  })
})
