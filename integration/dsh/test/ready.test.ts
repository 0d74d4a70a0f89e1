import { describe, expect, test } from 'vitest'
import { harnessPerFile } from './support/harness-per-file.js'
import { waitFor } from './support/daemon.js'
import { noticeTexts, startedTaskId } from './support/session.js'

const shared = harnessPerFile('ready')
const { run } = shared

describe('a dev server on the published harness: waited for, used, stopped', () => {
  test('task_output wait_for returns at the server’s line, with the output up to it; the server is then used and stopped', async () => {
    const start = { command: 'python3 -u -m http.server 0 --bind 127.0.0.1', description: 'web', run_in_background: true }
    const { results } = await run('wait-for', [{ name: 'bash', args: start }])
    const id = startedTaskId(results[0]!.text)
    const { results: reads } = await run('wait-for', [{ name: 'task_output', args: { task_id: id, wait_for: 'Serving HTTP on .* port \\d+', wait_ms: 30_000 } }])
    const read = reads[0]!
    expect(read.isError, read.text).toBe(false)
    const line = /\[wait_for \/.*\/: matched the line "(Serving HTTP on 127\.0\.0\.1 port (\d+) [^"]*)"\]\n/.exec(read.text)
    expect(line, read.text).not.toBeNull()
    expect(read.text.endsWith(`${line![1]}\n[still running: call task_output again later, or with wait_ms to wait for more]`)).toBe(true)
    const fetch = `python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:${line![2]}/').status)"`
    const { results: used } = await run('wait-for', [{ name: 'bash', args: { command: fetch } }, { name: 'task_kill', args: { task_id: id } }])
    expect(used[0]!.text.split('\n').slice(0, 2)).toEqual(['200', '[exit code: 0]'])
    expect(used[1]!.text).toContain(`task ${id} (web) is killed`)
  })

  test('wait_for that runs out says no line matched, with what came', async () => {
    const { results } = await run('wait-for-none', [{ name: 'bash', args: { command: 'echo one; sleep 30', run_in_background: true } }])
    const id = startedTaskId(results[0]!.text)
    await shared.daemon.client.read(id, { waitMs: 10_000 })
    const { results: reads } = await run('wait-for-none', [
      { name: 'task_output', args: { task_id: id, wait_for: 'never', wait_ms: 300 } },
      { name: 'task_kill', args: { task_id: id } },
    ])
    expect(reads[0]!.text).toContain('[wait_for /never/: no new line matched in 300 ms]\none\n[still running')
  })

  test('bash ready: the call returns once the server is ready, with its line; one notice follows its end', async () => {
    const start = {
      command: 'exec python3 -u -m http.server "$PORT" --bind 127.0.0.1',
      description: 'dev server',
      run_in_background: true,
      port: 'auto',
      ready: { pattern: 'Serving HTTP on', timeout_ms: 30_000 },
    }
    const { agent, results } = await run('ready', [{ name: 'bash', args: start }])
    const result = results[0]!
    expect(result.isError, result.text).toBe(false)
    const id = startedTaskId(result.text)
    const port = /It was given port (\d+) as PORT\./.exec(result.text)![1]
    expect(result.text).toMatch(new RegExp(`\\[ready after [0-9.]+ (ms|s): the line "Serving HTTP on 127\\.0\\.0\\.1 port ${port} [^"]*" matched; `))
    expect(result.meta).toMatchObject({ taskId: id, background: true, yielded: true, exitCode: null })
    await shared.daemon.client.kill(id)
    await waitFor('the end notice', () => noticeTexts(agent).some((notice) => notice.includes(id)))
    expect(noticeTexts(agent).filter((notice) => notice.includes(id))).toHaveLength(1)
  })
})
