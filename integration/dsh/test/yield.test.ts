import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { harnessPerFile } from './support/harness-per-file.js'
import { waitFor, textWithCost } from './support/daemon.js'
import { noticeTexts, startedTaskId } from './support/session.js'

/**
 * Yield in the published harness's agent loop: a foreground bash that outlives its yield time
 * returns "still running" with its task id, and the task goes on as the agent's background task.
 */

// The default yield comes from the plugin's configuration.
const shared = harnessPerFile('yield', { defaultYieldMs: 1500 })
const { run } = shared

function yieldedId(text: string): string {
  const match = /\[still running after \d+ms; it goes on as background task ([0-9a-z]{12}) /.exec(text)
  if (!match) throw new Error(`not a yielded bash result: ${text}`)
  return match[1]!
}

/** Once a later task's notice is in, a notice for an earlier task of the same agent would be too. */
async function settleWithMarker(agentId: string): Promise<void> {
  const { agent, results } = await run(agentId, [{ name: 'bash', args: { command: 'true', description: 'marker', run_in_background: true } }])
  const markerId = startedTaskId(results[0]!.text)
  await waitFor(`the marker notice of ${markerId}`, () => noticeTexts(agent).some((notice) => notice.includes(markerId)))
  await agent.whenIdle()
}

const gate = (path: string) => `until [ -e '${path}' ]; do sleep 0.02; done`

describe('yield on the published harness', () => {
  test('a dev-server-like foreground command yields, is read later, is stopped by its time limit, and gets exactly one notice', async () => {
    const more = join(shared.scratch, 'dev-more')
    const args = { command: `echo ready; ${gate(more)}; echo serving; exec sleep 1000`, description: 'dev server', timeout: 8000 }
    const { agent, results } = await run('yield-dev', [{ name: 'bash', args }])
    const [started] = results
    expect(started!.isError, started!.text).toBe(false)
    const id = yieldedId(started!.text)
    expect(started!.text).toBe(
      `ready\n[still running after 1500ms; it goes on as background task ${id} (dev server). Read more with task_output (task_id: "${id}"); stop it with task_kill. A notice arrives when it finishes (at the latest when its time limit of 8000ms stops it).]`,
    )
    expect(started!.meta).toEqual({ taskId: id, background: false, yielded: true, output: 'ready\n', exitCode: null, signal: null })
    const bash = shared.harness.root.tools.get('bash')!
    expect(bash.presentResult!(args, { content: [{ type: 'text', text: started!.text }], isError: false, meta: started!.meta as never })).toEqual({ card: 'terminal', title: args.command, output: 'ready\n' })
    expect((await shared.daemon.client.get(id)).state).toBe('running')
    expect(noticeTexts(agent)).toEqual([])

    writeFileSync(more, '')
    const { results: reads } = await run('yield-dev', [{ name: 'task_output', args: { task_id: id, wait_ms: 10_000 } }])
    expect(reads[0]!.text).toBe(`task ${id} (dev server): running; bytes 6–14 of 14\nserving\n[still running: call task_output again later, or with wait_ms to wait for more]`)

    await waitFor(`the notice of task ${id}, stopped by its time limit`, () => noticeTexts(agent).some((notice) => notice.includes(id)), 20_000)
    await agent.whenIdle()
    expect(await shared.daemon.client.get(id)).toMatchObject({ state: 'timed_out' })
    await settleWithMarker('yield-dev')
    expect(noticeTexts(agent).filter((notice) => notice.includes(id))).toEqual([
      expect.stringMatching(
        textWithCost(`background task ${id} (dev server) finished [status: timed_out, exit code: none, stopped by: timeout]. Read its output with task_output.`, 'timed out'),
      ),
    ])
  })

  test('a yielded command the agent stops with task_kill gets no notice; one that ends before yield_ms returns as before', async () => {
    const { agent, results } = await run('yield-kill', [
      { name: 'bash', args: { command: 'echo up; exec sleep 1000', description: 'to be killed', yield_ms: 300 } },
      { name: 'bash', args: { command: 'echo quick', yield_ms: 60_000 } },
    ])
    const id = yieldedId(results[0]!.text)
    expect(results[1]!.text).toMatch(textWithCost('quick\n[exit code: 0]', 'exited 0'))
    expect(results[1]!.meta).toMatchObject({ yielded: false, exitCode: 0 })
    const { results: killed } = await run('yield-kill', [{ name: 'task_kill', args: { task_id: id } }])
    expect(killed[0]!.text).toMatch(new RegExp(`^task ${id} \\(to be killed\\) is killed`))
    await settleWithMarker('yield-kill')
    expect(noticeTexts(agent).filter((notice) => !notice.includes('(marker)'))).toEqual([])
  })
})
