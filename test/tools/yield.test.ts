import { describe, expect, test } from 'vitest'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pluginPerFile } from '../harness/plugin-per-file.js'
import { callTool, TestAgent, textOf } from '../harness/host.js'
import { textWithCost } from '../helpers/cost-line.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait-for.js'

/**
 * Yield: a foreground bash that outlives its yield time returns what it printed so far and goes
 * on as the agent's background task, with one notice when it ends (unless the agent saw the end).
 */

// A small budget and a short default yield, as a shared.host may configure them.
const shared = pluginPerFile('yield', { outputBudgetBytes: 2000, defaultYieldMs: 1000 })

const yieldedId = (text: string) => {
  const match = /still running after \d+ms; it goes on as background task ([0-9a-z]{12}) /.exec(text)
  if (!match) throw new Error(`not a yielded bash result: ${text}`)
  return match[1]!
}
const startedId = (text: string) => /Started background task ([0-9a-z]{12})/.exec(text)![1]!
const gate = (path: string) => `until [ -e '${path}' ]; do sleep 0.02; done`
const liveProcessesOf = (taskId: string) => processesWithEnv(`TEND_TASK_ID=${taskId}`).filter(isAlive)

/** Once a later task's notice is in, any notice for an earlier task would be too (one event stream). */
async function settleWithMarker(agent: TestAgent): Promise<void> {
  const markerId = startedId(
    textOf(await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'true', run_in_background: true, description: 'marker' } })),
  )
  await waitFor(`the marker notice of ${markerId}`, () => agent.notices().some((notice) => notice.includes(markerId)))
}

const noticesFor = (agent: TestAgent, id: string) => agent.notices().filter((notice) => notice.includes(id))

describe('bash yields a foreground command that outlives yield_ms', () => {
  test('a dev-server-like command yields with its output so far; task_output reads on; its time limit stops it; one notice follows', async () => {
    const agent = new TestAgent('yield-dev')
    const more = join(shared.workspace, 'dev-more')
    const args = { command: `echo ready; ${gate(more)}; echo serving; exec sleep 1000`, description: 'dev server', yield_ms: 1500, timeout: 8000 }
    const result = await callTool(shared.host, agent, { name: 'bash', arguments: args })
    expect(result.isError, textOf(result)).toBe(false)
    const id = yieldedId(textOf(result))
    expect(textOf(result)).toBe(
      `ready\n[still running after 1500ms; it goes on as background task ${id} (dev server). Read more with task_output (task_id: "${id}"); stop it with task_kill. A notice arrives when it finishes (at the latest when its time limit of 8000ms stops it).]`,
    )
    expect(result.meta).toEqual({ taskId: id, background: false, yielded: true, output: 'ready\n', exitCode: null, signal: null })
    expect(shared.host.tools.tools.get('bash')!.presentResult(args, { ...result, isError: false })).toEqual({
      card: 'terminal',
      title: args.command,
      output: 'ready\n',
    })
    expect((await shared.daemon.client.get(id)).state).toBe('running')

    writeFileSync(more, '')
    const read = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, wait_ms: 10_000 } })
    // The yield moved the agent's cursor past "ready": the read goes on from there.
    expect(textOf(read)).toBe(
      `task ${id} (dev server): running; bytes 6–14 of 14\nserving\n[still running: call task_output again later, or with wait_ms to wait for more]`,
    )

    await waitFor(`the notice of task ${id}, stopped by its time limit`, () => noticesFor(agent, id).length > 0, 20_000)
    expect(await shared.daemon.client.get(id)).toMatchObject({ state: 'timed_out' })
    await settleWithMarker(agent)
    expect(noticesFor(agent, id)).toEqual([
      expect.stringMatching(
        textWithCost(
          `background task ${id} (dev server) finished [status: timed_out, exit code: none, stopped by: timeout]. Read its output with task_output.`,
          'timed out',
        ),
      ),
    ])
    expect(liveProcessesOf(id)).toEqual([])
  })

  test('a command that ends before yield_ms returns as before, with no notice', async () => {
    const agent = new TestAgent('yield-quick')
    const result = await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'echo quick', yield_ms: 60_000 } })
    expect(result).toMatchObject({
      isError: false,
      content: [{ type: 'text', text: expect.stringMatching(textWithCost('quick\n[exit code: 0]', 'exited 0')) }],
    })
    expect(result.meta).toMatchObject({ background: false, yielded: false, output: 'quick\n', exitCode: 0 })
    await settleWithMarker(agent)
    expect(agent.notices().filter((notice) => !notice.includes('(marker)'))).toEqual([])
  })

  test('a yielded task the agent kills with task_kill gets no notice: the agent saw its end', async () => {
    const agent = new TestAgent('yield-kill')
    const result = await callTool(shared.host, agent, {
      name: 'bash',
      arguments: { command: 'echo up; exec sleep 1000', description: 'to be killed', yield_ms: 500 },
    })
    const id = yieldedId(textOf(result))
    const killed = await callTool(shared.host, agent, { name: 'task_kill', arguments: { task_id: id } })
    expect(textOf(killed)).toMatch(new RegExp(`^task ${id} \\(to be killed\\) is killed`))
    expect(liveProcessesOf(id)).toEqual([])
    await settleWithMarker(agent)
    expect(noticesFor(agent, id)).toEqual([])
  })

  test('a yielded task that ends on its own gets exactly one notice, and reading it to the end afterwards adds none', async () => {
    const agent = new TestAgent('yield-ends')
    const finish = join(shared.workspace, 'ends-finish')
    const id = yieldedId(
      textOf(
        await callTool(shared.host, agent, {
          name: 'bash',
          arguments: { command: `echo started; ${gate(finish)}; echo finished`, description: 'ends later', yield_ms: 300 },
        }),
      ),
    )
    writeFileSync(finish, '')
    await waitFor(`the notice of task ${id}`, () => noticesFor(agent, id).length > 0)
    const read = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id } })
    expect(textOf(read)).toContain('finished\n[exit code: 0]')
    await settleWithMarker(agent)
    expect(noticesFor(agent, id)).toEqual([
      expect.stringMatching(
        textWithCost(`background task ${id} (ends later) finished [status: exited, exit code: 0]. Read its output with task_output.`, 'exited 0'),
      ),
    ])
  })

  test('without yield_ms the plugin default applies; the output so far is shaped to the budget and the cursor moves to its end', async () => {
    const agent = new TestAgent('yield-default')
    const result = await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'seq 1 5000; exec sleep 1000', description: 'lots then waits' } })
    const text = textOf(result)
    const id = yieldedId(text)
    expect(text).toContain('still running after 1000ms')
    expect(text).toMatch(new RegExp(`\\[… \\d+ bytes omitted \\(bytes (\\d+)–\\d+\\); read them with task_output \\(task_id: "${id}", from: \\1\\) …\\]`))
    expect(text).toContain('\n5000\n[still running')
    const next = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id } })
    expect(textOf(next)).toContain('(no new output)')
    await callTool(shared.host, agent, { name: 'task_kill', arguments: { task_id: id } })
  })

  test('an abort after the call yielded does not touch the task; an abort before the yield stops it', async () => {
    const agent = new TestAgent('yield-abort')
    const late = new AbortController()
    const result = await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'exec sleep 1000', yield_ms: 300 }, signal: late.signal })
    const id = yieldedId(textOf(result))
    expect(textOf(result)).toMatch(/^\(no output yet\)\n\[still running/)
    late.abort()
    // A later call of the same agent sees it running: the abort came after the call was over.
    expect(textOf(await callTool(shared.host, agent, { name: 'task_list', arguments: {} }))).toMatch(new RegExp(`${id}  running`))

    const early = new AbortController()
    const call = callTool(shared.host, agent, {
      name: 'bash',
      arguments: { command: 'exec sleep 1000', description: 'aborted early', yield_ms: 600_000 },
      signal: early.signal,
    })
    const running = await waitFor('the foreground task to run', async () =>
      (await shared.daemon.client.list({ owner: 'yield-abort' })).find((task) => task.name === 'aborted early' && task.state === 'running'),
    )
    early.abort()
    expect(await call).toMatchObject({ isError: true, content: [{ text: `aborted; foreground task ${running.id} was stopped` }] })
    expect((await shared.daemon.client.get(running.id)).state).toBe('killed')
    expect((await shared.daemon.client.get(id)).state).toBe('running')
    await callTool(shared.host, agent, { name: 'task_kill', arguments: { task_id: id } })
  })

  test('yield_ms must be a positive whole number of milliseconds; with run_in_background it is not used', async () => {
    const agent = new TestAgent('yield-args')
    for (const bad of [0, -5, 1.5]) {
      const result = await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'echo never', yield_ms: bad } })
      expect(result).toMatchObject({ isError: true, content: [{ text: `yield_ms must be a positive whole number of milliseconds, got ${bad}` }] })
    }
    expect(textOf(await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'true', yield_ms: '5' } }))).toBe(
      'invalid arguments for bash: arguments.yield_ms: expected a number, got string "5"',
    )
    expect(await shared.daemon.client.list({ owner: 'yield-args', all: true })).toEqual([])
    const background = await callTool(shared.host, agent, { name: 'bash', arguments: { command: 'sleep 1000', run_in_background: true, yield_ms: 50 } })
    const id = startedId(textOf(background))
    await callTool(shared.host, agent, { name: 'task_kill', arguments: { task_id: id } })
  })

  test('the description and parameters tell the model about yield_ms with the configured numbers', () => {
    const bash = shared.host.tools.tools.get('bash')!
    expect(bash.description).toContain('A command still running after yield_ms (default 1000) is not stopped')
    expect(bash.inputSchema).toMatchObject({
      properties: { yield_ms: { type: 'number', description: expect.stringContaining('(default 1000, at most 600000; not used with run_in_background)') } },
    })
  })
})
