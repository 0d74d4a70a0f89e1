import { describe, expect, test } from 'vitest'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pluginPerFile } from '../harness/plugin-per-file.js'
import { callTool, TestAgent, textOf } from '../harness/host.js'
import { expectPlain, rawOutputOf as rawOutputOfTask, trackedTaskIdIn } from '../harness/plain-text.js'
import { costLinePattern, textWithCost } from '../helpers/cost-line.js'
import { waitFor } from '../helpers/wait-for.js'

/**
 * Terminals through the agent tools: bash with tty: true runs the command on a pseudo-terminal,
 * task_input types into it, and every result the model reads is plain text — no escape sequence,
 * no \r — while output.log keeps what the terminal showed.
 */

const shared = pluginPerFile('tools-tty')

const taskIdIn = (text: string) => trackedTaskIdIn(shared, text)
const rawOutputOf = (id: string) => rawOutputOfTask(shared, id)

describe('a Python REPL on a terminal (bash tty: true, task_input)', () => {
  test('define, print, exit: every result is plain text with the echo of what was typed', async () => {
    const agent = new TestAgent('tty-repl')
    const bash = await callTool(shared.host, agent, {
      name: 'bash',
      arguments: { command: 'python3 -q', description: 'python', run_in_background: true, tty: true, cwd: shared.workspace },
    })
    expect(bash.isError, textOf(bash)).toBe(false)
    const id = taskIdIn(textOf(bash))
    expect(await shared.daemon.client.get(id)).toMatchObject({ tty: { cols: 80, rows: 24 }, stdin: 'pipe' })
    await waitFor('the first prompt', async () => (await rawOutputOf(id)).includes('>>> '))

    const defined = await callTool(shared.host, agent, { name: 'task_input', arguments: { task_id: id, text: 'x = 6 * 7\n', yield_ms: 5000 } })
    expect(textOf(defined)).toMatch(new RegExp(`^typed 10 bytes into the terminal of task ${id}\ntask ${id} \\(python\\): running; bytes 0–\\d+ of \\d+\n`))
    expect(textOf(defined)).toContain('>>> x = 6 * 7\n')
    expectPlain(textOf(defined))

    const printed = await callTool(shared.host, agent, { name: 'task_input', arguments: { task_id: id, text: 'print(x)\n', yield_ms: 5000 } })
    expect(textOf(printed)).toContain('print(x)\n42\n>>> ')
    expectPlain(textOf(printed))
    // The terminal's own record is raw: \r\n line ends.
    expect(await rawOutputOf(id)).toContain('print(x)\r\n42\r\n')

    const exited = await callTool(shared.host, agent, { name: 'task_input', arguments: { task_id: id, text: 'exit()\n', yield_ms: 10_000 } })
    expect(textOf(exited)).toContain('[exit code: 0]')
    expectPlain(textOf(exited))
    expect(agent.notices().filter((notice) => notice.includes(id))).toEqual([])
  })

  test('eof: true types Ctrl-D: the REPL ends and the result says the terminal stayed open', async () => {
    const agent = new TestAgent('tty-eof')
    const id = taskIdIn(
      textOf(
        await callTool(shared.host, agent, {
          name: 'bash',
          arguments: { command: 'python3 -q', description: 'python', yield_ms: 500, tty: true, cwd: shared.workspace },
        }),
      ),
    )
    await waitFor('the first prompt', async () => (await rawOutputOf(id)).includes('>>> '))
    const ended = await callTool(shared.host, agent, { name: 'task_input', arguments: { task_id: id, text: '', eof: true, yield_ms: 10_000 } })
    expect(textOf(ended)).toContain(`typed 0 bytes into the terminal of task ${id}, then Ctrl-D (end of input; the terminal stays open)`)
    expect(textOf(ended)).toContain('[exit code: 0]')
  })
})

describe('terminal output in bash and task_output results', () => {
  test('a foreground command on a terminal: colours, a title and a redrawn progress line come back as plain text', async () => {
    const agent = new TestAgent('tty-foreground')
    const command = [
      'printf "\\033]0;my build\\007"',
      '[ -t 1 ] && printf "\\033[1;32mon a terminal\\033[0m\\n"',
      'printf " 10%%\\r 60%%\\r\\033[K100%%\\n"',
      'echo "size $(stty size)"',
    ].join('; ')
    const result = await callTool(shared.host, agent, { name: 'bash', arguments: { command, tty: true, cwd: shared.workspace } })
    expect(textOf(result)).toMatch(textWithCost('on a terminal\n100%\nsize 24 80\n[exit code: 0]', 'exited 0'))
    expect((result.meta as { output: string }).output).toBe('on a terminal\n100%\nsize 24 80\n')
  })

  test('task_output with a filter and with a small budget reads plain text too', async () => {
    const agent = new TestAgent('tty-shaping')
    const command = 'i=1; while [ $i -le 300 ]; do printf "\\033[33mline %03d\\033[0m\\n" $i; i=$((i+1)); done'
    const id = taskIdIn(
      textOf(await callTool(shared.host, agent, { name: 'bash', arguments: { command, tty: true, run_in_background: true, cwd: shared.workspace } })),
    )
    await shared.daemon.client.wait(id, { timeoutMs: 10_000 })
    const filtered = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, from: 0, filter: '^line 0(07|42)$' } })
    expect(textOf(filtered)).toContain('[filter /^line 0(07|42)$/: 2 matching lines]\nline 007\nline 042\n')
    const shaped = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, max_bytes: 400 } })
    expectPlain(textOf(shaped))
    expect(textOf(shaped)).toMatch(/^line 001\n/m)
    expect(textOf(shaped)).toMatch(
      new RegExp(`\\[… \\d+ bytes omitted \\(bytes (\\d+)–\\d+\\); read them with task_output \\(task_id: "${id}", from: \\1\\) …\\]\\n`),
    )
    expect(textOf(shaped)).toMatch(new RegExp(`line 300\\n\\[exit code: 0\\]\\n\\[${costLinePattern('exited 0')}\\]$`))
  })

  test("an escape sequence cut off by the end of the output so far is held back: the agent's place stops before it", async () => {
    const agent = new TestAgent('tty-held')
    const gate = join(shared.workspace, 'held-gate')
    const command = `printf 'ready \\033[3'; while [ ! -e '${gate}' ]; do sleep 0.02; done; printf '1mred\\033[0m done\\n'`
    const id = taskIdIn(
      textOf(await callTool(shared.host, agent, { name: 'bash', arguments: { command, tty: true, run_in_background: true, cwd: shared.workspace } })),
    )
    await waitFor('the cut sequence in output.log', async () => (await rawOutputOf(id)).endsWith('\x1b[3'))
    // Output can be there a moment before the running record is (it is written once the task runs).
    await waitFor('the task to be recorded running', async () => (await shared.daemon.client.get(id)).state === 'running')
    const first = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id } })
    expect(textOf(first)).toBe(
      `task ${id} (${(await shared.daemon.client.get(id)).command[2]}): running; bytes 0–6 of 9\nready \n[still running: call task_output again later, or with wait_ms to wait for more]`,
    )
    writeFileSync(gate, '')
    const second = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, wait_ms: 10_000 } })
    await shared.daemon.client.wait(id, { timeoutMs: 10_000 })
    // The rest, and the task's end, come over one or more reads (a read may find only the held
    // sequence, or the rest while the task is still recorded running): the agent's place resumes
    // at the cut sequence, and the rest is shown once, whole.
    const reads = [textOf(second)]
    while (!reads.at(-1)!.includes('[exit code: 0]') && reads.length < 4)
      reads.push(textOf(await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, wait_ms: 10_000 } })))
    expect(reads.at(-1)).toMatch(new RegExp(`: exited; bytes \\d+–\\d+ of \\d+\\n[\\s\\S]*\\[exit code: 0\\]\\n\\[${costLinePattern('exited 0')}\\]$`))
    const withRest = reads.filter((read) => read.includes('red done'))
    expect(withRest, reads.join('\n---\n')).toHaveLength(1)
    expect(withRest[0]).toMatch(/: (running|exited); bytes 6–\d+ of \d+\nred done\n/)
  })
})

describe('bash describes tty', () => {
  test('bash has a tty parameter whose description says what it does; task_input says it types into a terminal', () => {
    const bash = shared.host.tools.tools.get('bash')!
    expect(bash.inputSchema).toMatchObject({ properties: { tty: { type: 'boolean', description: expect.stringContaining('pseudo-terminal') } } })
    expect(bash.description).toContain('tty runs it on a pseudo-terminal')
    expect(shared.host.tools.tools.get('task_input')!.description).toContain('eof: true types Ctrl-D')
  })
})
