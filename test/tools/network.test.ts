import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { chmodSync, mkdtempSync } from 'node:fs'
import { join } from 'node:path'
import type { Context } from 'cordis'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { TendClient, isTendError, sandboxHint, type BlockedDestination, type Task } from '../../client/index.js'
import { endingText, renderTaskOutput, type TaskOutputResult } from '../../tools/core/index.js'
import { normalizeDshPluginConfig } from '../../tools/dsh/config.js'
import * as tendPlugin from '../../tools/index.js'
import { callTool, createHost, TestAgent, textOf } from '../harness/host.js'
import { textWithCost } from '../helpers/cost-line.js'
import { daemonPerFile } from '../helpers/daemon-per-file.js'
import { taskBase } from '../helpers/task-base.js'
import { REPO_ROOT, TEND_BIN } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * The agent tools' side of networks: bash's network parameter (host only where the operator
 * allows it), allowNet never from an agent, a sandbox hint in the tools' own terms, blocked
 * destinations in the result of a command that failed, and a "the rest of the output" pointer the
 * agent can follow (task_output from a byte offset, not a spool path hidden by its sandbox).
 */

const shared = daemonPerFile('tools-network', { env: { TEND_SANDBOX: 'workspace' } })
/** A host whose plugin does not offer host, and one whose operator allowed it. */
let plain: Context
let withHost: Context
const forks: Array<{ dispose: () => unknown }> = []

beforeAll(async () => {
  // A root daemon's tasks run on a uid of their own, which must reach their cwd.
  chmodSync(shared.workspace, 0o711)
  plain = createHost()
  withHost = createHost()
  forks.push(plain.plugin(tendPlugin, { home: shared.daemon.home, outputBudgetBytes: 2000 }))
  forks.push(withHost.plugin(tendPlugin, { home: shared.daemon.home, allowHostNetwork: true }))
  await waitFor('the tend tools to be registered in both hosts', () => plain.tools.tools.size === 5 && withHost.tools.tools.size === 5)
})
afterAll(() => {
  for (const fork of forks.splice(0)) fork.dispose()
})

interface JsonProperty {
  type: string
  enum?: string[]
  description?: string
}
const bashProperties = (host: Context) => (host.tools.tools.get('bash')!.inputSchema as { properties: Record<string, JsonProperty> }).properties

/** A finished record, as the daemon would write it, with what the egress proxy refused. */
function finished(fields: Partial<Task>, blocked: BlockedDestination[] = []): Task {
  return {
    ...taskBase({ sandbox: 'workspace', network: 'allow', cwd: '/work/app', outputBytes: 10 }),
    state: 'exited',
    startedAt: '2026-11-30T00:00:01.000Z',
    pid: 4242,
    endedAt: '2026-11-30T00:00:02.000Z',
    exitCode: 7,
    signal: null,
    reason: null,
    stoppedBy: null,
    networkUse: { allowed: 1, blocked: blocked.reduce((sum, each) => sum + each.count, 0), sentBytes: 10, receivedBytes: 20, blockedDestinations: blocked },
    ...fields,
  } as Task
}
const EVIL = { name: 'evil.example', port: 443, reason: 'not on the allowlist', count: 1 }

describe("bash's network parameter", () => {
  test('offers loopback and allow, with one sentence on what each reaches; host only where the operator allowed it', () => {
    const network = bashProperties(plain).network!
    expect(network).toMatchObject({ type: 'string', enum: ['loopback', 'allow'] })
    expect(network.description).toMatch(/loopback.*127\.0\.0\.1/)
    expect(network.description).toMatch(/allow.*allowlist/)
    expect(network.description).not.toContain('host')
    expect(bashProperties(withHost).network).toMatchObject({ enum: ['loopback', 'allow', 'host'] })
    expect(bashProperties(withHost).network!.description).toMatch(/host.*the host's whole network/)
    // The agent may only choose the operator's list: no parameter adds destinations.
    for (const host of [plain, withHost]) expect(Object.keys(bashProperties(host)).filter((key) => /allow.?net|destination/i.test(key))).toEqual([])
  })

  test('host where it is not offered is a tool error naming the parameter and how the operator enables it; nothing runs', async () => {
    const result = await callTool(plain, new TestAgent('net-host-refused'), { name: 'bash', arguments: { command: 'true', network: 'host' } })
    expect(result.isError).toBe(true)
    expect(textOf(result)).toMatch(/^network: "host" is not offered here/)
    expect(textOf(result)).toContain('allowHostNetwork: true')
    expect(textOf(result)).toContain('tend mcp --allow-host-network')
    expect(await shared.daemon.client.list({ owner: 'net-host-refused', all: true })).toEqual([])
  })

  test("the mode chosen is the task's network: loopback by default, host where offered", async () => {
    const agent = new TestAgent('net-modes')
    expect(textOf(await callTool(withHost, agent, { name: 'bash', arguments: { command: 'echo one', description: 'default' } }))).toMatch(
      textWithCost('one\n[exit code: 0]', 'exited 0'),
    )
    expect(textOf(await callTool(withHost, agent, { name: 'bash', arguments: { command: 'echo two', description: 'host', network: 'host' } }))).toMatch(
      textWithCost('two\n[exit code: 0]', 'exited 0'),
    )
    expect(
      textOf(await callTool(withHost, agent, { name: 'bash', arguments: { command: 'echo three', description: 'loopback', network: 'loopback' } })),
    ).toMatch(textWithCost('three\n[exit code: 0]', 'exited 0'))
    const byLabel = Object.fromEntries((await shared.daemon.client.list({ owner: 'net-modes', all: true })).map((task) => [task.name, task.network]))
    expect(byLabel).toEqual({ default: 'loopback', host: 'host', loopback: 'loopback' })
  })

  test('an agent cannot pass allowNet: the tool has no such parameter, and the daemon refuses it from a request acting for an owner', async () => {
    const refused = await callTool(withHost, new TestAgent('net-allownet'), { name: 'bash', arguments: { command: 'true', allowNet: ['evil.example'] } })
    expect(refused.isError).toBe(true)
    expect(textOf(refused)).toMatch(/^invalid arguments for bash: arguments\.allowNet: unknown property/)
    const asAgent = new TendClient({ home: shared.daemon.home, owner: 'net-allownet', autoStart: false })
    const error = await asAgent
      .start({ command: ['true'], cwd: shared.workspace, network: 'allow', allowNet: ['evil.example'] })
      .catch((caught: unknown) => caught)
    expect(isTendError(error) && error.code).toBe('TEND_ERR_VALIDATION')
    expect((error as Error).message).toContain('body/allowNet: only the operator may allow a task more destinations')
    expect(await shared.daemon.client.list({ owner: 'net-allownet', all: true })).toEqual([])
  })

  test('the published harness plugin takes allowHostNetwork as an option, off by default', () => {
    expect(normalizeDshPluginConfig({}).settings.allowHostNetwork).toBe(false)
    expect(normalizeDshPluginConfig({ allowHostNetwork: true }).settings.allowHostNetwork).toBe(true)
    expect(() => normalizeDshPluginConfig({ allowHostNetwork: 'yes' })).toThrow(/allowHostNetwork: /)
  })
})

describe('tend mcp --allow-host-network', () => {
  async function listBashNetwork(args: string[]): Promise<JsonProperty> {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [TEND_BIN, 'mcp', ...args],
      env: { ...shared.daemon.env, PATH: process.env.PATH ?? '' } as Record<string, string>,
      cwd: REPO_ROOT,
      stderr: 'pipe',
    })
    const client = new Client({ name: 'tend-network-test', version: '0.0.0' })
    await client.connect(transport)
    try {
      const { tools } = await client.listTools()
      return (tools.find((tool) => tool.name === 'bash')!.inputSchema.properties as Record<string, JsonProperty>).network!
    } finally {
      await client.close()
    }
  }

  test('without the flag the bash schema offers no host; with it, it does', async () => {
    expect((await listBashNetwork([])).enum).toEqual(['loopback', 'allow'])
    expect((await listBashNetwork(['--allow-host-network'])).enum).toEqual(['loopback', 'allow', 'host'])
  })
})

describe("the sandbox hint an agent sees names the tool's parameters", () => {
  /** The end of the output of a task the sandbox refused a write. */
  const REFUSED = 'sh: 1: cannot create /var/tmp/probe: Read-only file system\n'

  test('a failed loopback task: network "allow" is offered, no CLI flag is named; the CLI keeps its flags', () => {
    const task = finished({ network: 'loopback' })
    const text = endingText(task, undefined, REFUSED)
    expect(text.split('\n')[0]).toBe('[exit code: 7]')
    expect(text).toContain('[ran in sandbox workspace: it could write only /work/app')
    expect(text).toContain('network: its loopback only')
    expect(text).toContain('bash\'s network parameter: "allow"')
    expect(text).not.toContain('"host"')
    expect(text).not.toMatch(/--[a-z]/)
    expect(sandboxHint(task, REFUSED)).toMatch(/To allow more: --writable PATH, --network allow, --net, --sandbox off$/)
  })

  test("where host is offered it is named too; a task that had the host's network is offered no network", () => {
    expect(endingText(finished({ network: 'loopback' }), ['loopback', 'allow', 'host'], REFUSED)).toContain(
      '"allow" (the operator\'s allowlist) or "host" (the host\'s whole network)',
    )
    const onHost = endingText(finished({ network: 'host' }), ['loopback', 'allow', 'host'], REFUSED)
    expect(onHost).not.toContain('network parameter')
    expect(onHost).not.toMatch(/--[a-z]/)
    expect(onHost).toContain('only the operator')
  })

  test("end to end: a sandboxed bash command that fails gets the agent's hint", async () => {
    const cwd = mkdtempSync(join(shared.workspace, 'ws-'))
    const text = textOf(
      await callTool(plain, new TestAgent('net-hint'), { name: 'bash', arguments: { command: 'echo x > /var/tmp/tend-network-hint-probe; exit 3', cwd } }),
    )
    expect(text).toContain('[exit code: 3]')
    expect(text).toContain(`[ran in sandbox workspace: it could write only ${cwd}`)
    expect(text).toContain('bash\'s network parameter: "allow"')
    expect(text).not.toMatch(/--[a-z]/)
  })
})

describe('blocked destinations in the result of a command that failed', () => {
  test('a non-zero exit after a block says what was blocked and why', () => {
    const text = endingText(finished({}, [EVIL]))
    expect(text.split('\n').slice(0, 2)).toEqual(['[exit code: 7]', '[blocked: evil.example:443 (not on the allowlist)]'])
  })

  test('several destinations, repeated attempts, and an IPv6 address in brackets', () => {
    const text = endingText(finished({}, [EVIL, { name: 'fd00::1', port: 5432, reason: 'a private address', count: 3 }]))
    expect(text).toContain('[blocked: evil.example:443 (not on the allowlist); [fd00::1]:5432 (a private address, 3 attempts)]')
  })

  test('a killed or timed-out command says so too; a command that succeeded, or nothing blocked, does not', () => {
    const killed = finished(
      { state: 'killed', exitCode: null, signal: 'SIGTERM', reason: 'killed by request (SIGTERM)', stoppedBy: 'owner' } as Partial<Task>,
      [EVIL],
    )
    expect(endingText(killed)).toContain('[blocked: evil.example:443 (not on the allowlist)]')
    const timedOut = finished(
      { state: 'timed_out', exitCode: null, signal: 'SIGTERM', reason: 'timed out after 500ms', stoppedBy: 'timeout' } as Partial<Task>,
      [EVIL],
    )
    expect(endingText(timedOut)).toContain('[blocked: evil.example:443 (not on the allowlist)]')
    expect(endingText(finished({ exitCode: 0 }, [EVIL]))).toBe('[exit code: 0]')
    expect(endingText(finished({ network: 'allow' }, []))).not.toContain('blocked')
    expect(endingText(finished({ networkUse: undefined }))).not.toContain('blocked')
  })

  test('many destinations are cut to a few, saying how many more', () => {
    const many = Array.from({ length: 9 }, (_, index) => ({ name: `host${index}.example`, port: 443, reason: 'not on the allowlist', count: 1 }))
    const line = endingText(finished({}, many)).split('\n')[1]!
    // The most recent are the ones kept (the record lists them most recent last).
    expect(line).toContain('host8.example:443')
    expect(line).not.toContain('host0.example:443')
    expect(line).toMatch(/; and 4 more\]$/)
  })

  test('task_output of a finished task carries the same line', () => {
    const task = finished({}, [EVIL])
    const result: TaskOutputResult = {
      task,
      output: { text: 'curl: (56)\n', from: 0, next: 10, omittedBytes: 0 },
      filter: null,
      done: true,
      outputPath: '/unused',
    }
    expect(renderTaskOutput(result).split('\n').slice(-3, -1)).toEqual(['[exit code: 7]', '[blocked: evil.example:443 (not on the allowlist)]'])
  })
})

describe('the rest of a long output is read with task_output, not from a hidden path', () => {
  test('bash names task_output with the byte offset of what it left out, and that call returns it', async () => {
    const agent = new TestAgent('net-long')
    const text = textOf(
      await callTool(plain, agent, { name: 'bash', arguments: { command: 'i=1; while [ $i -le 2000 ]; do echo "line $i"; i=$((i+1)); done; exit 1' } }),
    )
    const [task] = await shared.daemon.client.list({ owner: 'net-long', all: true })
    expect(text).not.toContain(task!.spool)
    expect(text).not.toContain('output.log')
    const marker = /\[… (\d+) bytes omitted \(bytes (\d+)–(\d+)\); read them with task_output \(task_id: "([0-9a-z]{12})", from: (\d+)\) …\]/.exec(text)
    expect(marker, text).not.toBeNull()
    expect(marker![4]).toBe(task!.id)
    expect(marker![5]).toBe(marker![2])
    const from = Number(marker![5])
    const rest = textOf(await callTool(plain, agent, { name: 'task_output', arguments: { task_id: task!.id, from } }))
    // The head was cut at a line end: the first byte left out starts the line after its last.
    const lastShown = Number(text.split('\n[…')[0]!.split('\n').at(-1)!.replace('line ', ''))
    expect(rest.split('\n')[1]).toBe(`line ${lastShown + 1}`)
  })

  test('a filtered task_output that leaves matching lines out says how to see them, with no path', async () => {
    const agent = new TestAgent('net-filter')
    const started = textOf(
      await callTool(plain, agent, {
        name: 'bash',
        arguments: { command: 'i=1; while [ $i -le 2000 ]; do echo "match $i"; i=$((i+1)); done', run_in_background: true },
      }),
    )
    const id = /Started background task ([0-9a-z]{12})/.exec(started)![1]!
    shared.track(id)
    await waitFor('the task to finish', async () => ((await shared.daemon.client.get(id)).state === 'exited' ? true : undefined))
    const text = textOf(await callTool(plain, agent, { name: 'task_output', arguments: { task_id: id, filter: 'match', from: 0 } }))
    expect(text).toMatch(/\[… \d+ bytes of matching lines omitted; a narrower filter, or a larger max_bytes \(at most 1048576\), shows them …\]/)
    expect(text).not.toContain('output.log')
  })

  test('the descriptions say how to read the rest, not where a file is', () => {
    for (const name of ['bash', 'task_output']) {
      const description = plain.tools.tools.get(name)!.description
      expect(description, name).not.toContain('where the full output is')
      expect(description, name).toContain('task_output with from')
    }
  })
})
