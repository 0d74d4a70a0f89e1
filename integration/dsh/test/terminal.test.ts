import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { harnessPerFile } from './support/harness-per-file.js'
import { isAlive, waitFor, textWithCost } from './support/daemon.js'
import { noticeTexts, startedTaskId } from './support/session.js'

/**
 * Terminals in the published harness's agent loop: a Python REPL started by bash with tty: true,
 * driven through task_input; what the model reads (and the values Code Mode gets) is plain text.
 */

const shared = harnessPerFile('tty')
const { run } = shared
/** No escape sequence, no carriage return, no other control character but \n and \t. */
const expectPlain = (text: string) => expect(text, JSON.stringify(text)).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f]/)

describe('terminals on the published harness', () => {
  test('a Python REPL on a terminal: bash with tty: true, then task_input defines, prints and exits; every result is plain text', async () => {
    const { results: started } = await run('tty-repl', [{ name: 'bash', args: { command: 'python3 -q', description: 'python', run_in_background: true, tty: true, cwd: shared.scratch } }])
    expect(started[0]!.isError, started[0]!.text).toBe(false)
    const id = startedTaskId(started[0]!.text)
    const task = await shared.daemon.client.get(id)
    expect(task).toMatchObject({ tty: { cols: 80, rows: 24 }, stdin: 'pipe' })
    const outputLog = join(task.spool, 'output.log')
    await waitFor('the first prompt', () => readFileSync(outputLog, 'utf8').includes('>>> '))

    const { results: defined } = await run('tty-repl', [{ name: 'task_input', args: { task_id: id, text: 'x = 6 * 7\n', yield_ms: 5000 } }])
    expect(defined[0]!.isError, defined[0]!.text).toBe(false)
    expect(defined[0]!.text).toMatch(new RegExp(`^typed 10 bytes into the terminal of task ${id}\ntask ${id} \\(python\\): running;`))
    expect(defined[0]!.text).toContain('>>> x = 6 * 7\n')
    expectPlain(defined[0]!.text)

    const { results: printed } = await run('tty-repl', [{ name: 'task_input', args: { task_id: id, text: 'print(x)\n', yield_ms: 5000 } }])
    expect(printed[0]!.text).toContain('print(x)\n42\n>>> ')
    expectPlain(printed[0]!.text)
    expect(printed[0]!.meta).toMatchObject({ taskId: id, sentBytes: 9, done: false })
    expectPlain((printed[0]!.meta as { output: string }).output)
    expect(readFileSync(outputLog, 'utf8')).toContain('print(x)\r\n42\r\n')

    const { agent, results: exited } = await run('tty-repl', [{ name: 'task_input', args: { task_id: id, text: 'exit()\n', yield_ms: 10_000 } }])
    expect(exited[0]!.text).toContain('[exit code: 0]')
    expect(exited[0]!.meta).toMatchObject({ taskId: id, done: true, exitCode: 0 })
    expect(noticeTexts(agent).filter((notice) => notice.includes(id))).toEqual([])
    expect((await shared.daemon.client.get(id)).state).toBe('exited')
  })

  test('a foreground command on a terminal: colours and a redrawn progress line come back as plain text, and the terminal card gets it', async () => {
    const command = '[ -t 1 ] && printf "\\033[32mon a terminal\\033[0m\\n"; printf " 10%%\\r100%%\\n"'
    const { results } = await run('tty-foreground', [{ name: 'bash', args: { command, tty: true, cwd: shared.scratch } }])
    expect(results[0]!.text).toMatch(textWithCost('on a terminal\n100%\n[exit code: 0]', 'exited 0'))
    expect(results[0]!.meta).toMatchObject({ output: 'on a terminal\n100%\n', exitCode: 0 })
    const id = (results[0]!.meta as { taskId: string }).taskId
    const { pid } = await shared.daemon.client.get(id)
    expect(pid === null || !isAlive(pid)).toBe(true)
  })
})
