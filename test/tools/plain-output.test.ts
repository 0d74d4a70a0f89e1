import { describe, expect, test } from 'vitest'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pluginPerFile } from '../harness/plugin-per-file.js'
import { callTool, TestAgent, textOf } from '../harness/host.js'
import { expectPlain, rawOutputOf as rawOutputOfTask, trackedTaskIdIn } from '../harness/plain-text.js'
import { costLinePattern } from '../helpers/cost-line.js'
import { waitFor } from '../helpers/wait-for.js'

/**
 * Output of commands not on a terminal reaches the agent as plain text too: a colour code or a
 * `\r` progress line is noise the model pays for. output.log keeps the bytes as written.
 */

const shared = pluginPerFile('tools-plain-output')

const taskIdIn = (text: string) => trackedTaskIdIn(shared, text)
const rawOutputOf = (id: string) => rawOutputOfTask(shared, id)

const COLOURED = 'printf "\\033[1;31mERROR\\033[0m: disk full\\n"; printf " 10%%\\r 60%%\\r100%%\\n"'

describe('plain text from commands not on a terminal', () => {
  test("bash's result has no control sequences; output.log keeps them", async () => {
    const agent = new TestAgent('plain-bash')
    const result = textOf(await callTool(shared.host, agent, { name: 'bash', arguments: { command: COLOURED, cwd: shared.workspace } }))
    expect(result).toMatch(new RegExp(`^ERROR: disk full\\n100%\\n\\[exit code: 0\\]\\n\\[${costLinePattern('exited 0')}\\]$`))
    expectPlain(result)
    const [task] = await shared.daemon.client.list({ owner: 'plain-bash', all: true })
    expect(await rawOutputOf(task!.id)).toBe('\x1b[1;31mERROR\x1b[0m: disk full\n 10%\r 60%\r100%\n')
  })

  test('task_output, with and without a filter, and a wait_for match are plain text', async () => {
    const agent = new TestAgent('plain-output')
    const id = taskIdIn(
      textOf(await callTool(shared.host, agent, { name: 'bash', arguments: { command: COLOURED, cwd: shared.workspace, run_in_background: true } })),
    )
    await shared.daemon.client.wait(id)
    const read = textOf(await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, from: 0 } }))
    expect(read).toContain('\nERROR: disk full\n100%\n')
    expectPlain(read)
    const filtered = textOf(await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, from: 0, filter: '^ERROR' } }))
    expect(filtered).toContain('\nERROR: disk full\n')
    expectPlain(filtered)
    const waited = textOf(await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, wait_ms: 1000, wait_for: 'disk' } }))
    expectPlain(waited.replaceAll('\\u001b', '\x1b'))
  })

  test('an escape sequence cut off by the end of the output so far is held back, and shown whole later', async () => {
    const agent = new TestAgent('plain-held')
    const gate = join(shared.workspace, 'plain-held-gate')
    const command = `printf 'ready \\033[3'; while [ ! -e '${gate}' ]; do sleep 0.02; done; printf '1mred\\033[0m done\\n'`
    const id = taskIdIn(textOf(await callTool(shared.host, agent, { name: 'bash', arguments: { command, run_in_background: true, cwd: shared.workspace } })))
    await waitFor('the cut sequence in output.log', async () => (await rawOutputOf(id)).endsWith('\x1b[3'))
    await waitFor('the task to be recorded running', async () => (await shared.daemon.client.get(id)).state === 'running')
    const first = textOf(await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id } }))
    expect(first).toMatch(/: running; bytes 0–6 of 9\nready \n/)
    writeFileSync(gate, '')
    await shared.daemon.client.wait(id, { timeoutMs: 10_000 })
    const rest = textOf(await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id } }))
    expect(rest).toMatch(/: exited; bytes 6–\d+ of \d+\nred done\n/)
    expectPlain(rest)
  })
})
