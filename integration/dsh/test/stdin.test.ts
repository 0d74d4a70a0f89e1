import { describe, expect, test } from 'vitest'
import { harnessPerFile } from './support/harness-per-file.js'
import { noticeTexts, startedTaskId } from './support/session.js'

/**
 * stdin in the published harness's agent loop: a Python REPL started by bash with stdin: true and
 * driven entirely through task_input.
 */

const shared = harnessPerFile('stdin')
const { run } = shared

describe('stdin on the published harness', () => {
  test('a Python REPL: bash with stdin: true, then task_input defines a variable, prints it and exits', async () => {
    const { results: started } = await run('repl', [{ name: 'bash', args: { command: 'python3 -u -i -q', description: 'python repl', run_in_background: true, stdin: true, cwd: shared.scratch } }])
    expect(started[0]!.isError, started[0]!.text).toBe(false)
    const id = startedTaskId(started[0]!.text)

    const { results: defined } = await run('repl', [{ name: 'task_input', args: { task_id: id, text: 'x = 6 * 7\n' } }])
    expect(defined[0]!.isError, defined[0]!.text).toBe(false)
    expect(defined[0]!.text).toMatch(new RegExp(`^sent 10 bytes to the stdin of task ${id}\ntask ${id} \\(python repl\\): running;`))
    expect(defined[0]!.meta).toMatchObject({ taskId: id, sentBytes: 10, eof: false, done: false })

    const { results: printed } = await run('repl', [{ name: 'task_input', args: { task_id: id, text: 'print(x)\n', yield_ms: 5000 } }])
    expect(printed[0]!.text).toContain('42')

    const { agent, results: exited } = await run('repl', [{ name: 'task_input', args: { task_id: id, text: 'exit()\n', yield_ms: 10_000 } }])
    expect(exited[0]!.text).toContain('[exit code: 0]')
    expect(exited[0]!.meta).toMatchObject({ taskId: id, done: true, exitCode: 0 })
    expect((await shared.daemon.client.get(id)).state).toBe('exited')
    // The agent saw the ending in task_input's result: no notice.
    expect(noticeTexts(agent).filter((notice) => notice.includes(id))).toEqual([])
  })

  test('task_input to a task without stdin is an error result the model reads', async () => {
    const { results } = await run('repl-errors', [
      { name: 'bash', args: { command: 'echo hi', cwd: shared.scratch } },
      { name: 'task_list', args: {} },
    ])
    const id = /^([0-9a-z]{12}) /m.exec(results[1]!.text)![1]!
    const { results: refused } = await run('repl-errors', [{ name: 'task_input', args: { task_id: id, text: 'x\n' } }])
    expect(refused[0]!.isError).toBe(true)
    expect(refused[0]!.text).toContain(`task ${id} has no stdin pipe`)
  })
})
