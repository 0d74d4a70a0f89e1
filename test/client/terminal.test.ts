import { describe, expect, test } from 'vitest'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { execa } from 'execa'
import type { Task } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { TEND_BIN } from '../helpers/test-daemon.js'
import { daemonPerFile } from '../helpers/daemon-per-file.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * The CLI's side of terminals: tend run --tty with its size, tend resize, tend send typing into a
 * terminal, tend show, and tend logs --plain beside the raw output.log.
 */

const shared = daemonPerFile('cli-tty')

/** Starts `tend run` with these arguments and waits until the task runs. */
async function runOnTerminal(args: string[]): Promise<Task> {
  const result = await runCli(['run', '--cwd', shared.workspace, ...args], shared.daemon.env)
  expect(result.exitCode, result.stderr).toBe(0)
  const id = result.stdout.trim()
  shared.track(id)
  return waitFor(`task ${id} running`, async () => {
    const task = await shared.daemon.client.get(id)
    return task.state === 'running' ? task : null
  })
}

const rawOutputOf = (task: Task) => readFileSync(join(task.spool, 'output.log'), 'utf8')

// Bold only on a terminal, then its size, then each new size.
const SIZE_PROGRAM = [
  'if [ -t 1 ]; then printf "\\033]0;size watcher\\007\\033[1mon a terminal\\033[0m\\n"; fi',
  'echo "size $(stty size)"',
  'trap \'echo "resized $(stty size)"\' WINCH',
  'echo ready',
  'while :; do sleep 0.05; done',
].join('\n')

describe('tend run --tty and tend resize', () => {
  test('--cols and --rows set the size; show names the terminal; resize changes what stty size prints', async () => {
    const task = await runOnTerminal(['--tty', '--cols', '100', '--rows', '30', '-c', SIZE_PROGRAM])
    expect(task).toMatchObject({ tty: { cols: 100, rows: 30 }, stdin: 'pipe' })
    await waitFor('the program to be ready', () => rawOutputOf(task).includes('ready\r\n'))
    expect(rawOutputOf(task)).toContain('size 30 100\r\n')

    const shown = await runCli(['show', task.id], shared.daemon.env)
    expect(shown.stdout).toMatch(/^tty: {8}100x30 \(tend send types into it; tend resize ID COLS ROWS\)$/m)
    expect(shown.stdout).not.toMatch(/^stdin:/m)

    const resized = await runCli(['resize', task.id, '120', '40'], shared.daemon.env)
    expect(resized).toEqual({ exitCode: 0, stdout: `${task.id}: terminal 120x40\n`, stderr: '' })
    await waitFor('the program to print its new size', () => rawOutputOf(task).includes('resized 40 120\r\n'))
    const asJson = await runCli(['--json', 'resize', task.id, '90', '20'], shared.daemon.env)
    expect(asJson.exitCode, asJson.stderr).toBe(0)
    expect(JSON.parse(asJson.stdout)).toMatchObject({ id: task.id, tty: { cols: 90, rows: 20 } })
    await waitFor('the program to print the size after --json resize', () => rawOutputOf(task).includes('resized 20 90\r\n'))
    expect((await runCli(['show', task.id], shared.daemon.env)).stdout).toMatch(/^tty: {8}90x20 /m)
  })

  test('--tty alone gives 80x24', async () => {
    const task = await runOnTerminal(['--tty', '-c', SIZE_PROGRAM])
    expect(task.tty).toEqual({ cols: 80, rows: 24 })
    await waitFor('the size line', () => rawOutputOf(task).includes('size 24 80\r\n'))
  })

  test('a bad size, or a size without --tty, is a usage error (exit 2) that names the flag; nothing starts', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['--tty', '--cols', '0'], /option '--cols <n>' argument '0' is invalid\. expected a whole number from 1 to 10000, got "0"/],
      [['--tty', '--rows', '10001'], /option '--rows <n>' argument '10001' is invalid/],
      [['--tty', '--cols', 'wide'], /option '--cols <n>' argument 'wide' is invalid/],
      [['--tty', '--rows', '2.5'], /option '--rows <n>' argument '2\.5' is invalid/],
      [['--cols', '100'], /usage error: --cols: a terminal size needs --tty/],
      [['--rows', '40'], /usage error: --rows: a terminal size needs --tty/],
    ]
    const before = (await shared.daemon.client.list({ all: true })).length
    for (const [flags, message] of cases) {
      const result = await runCli(['run', ...flags, '-c', 'echo never'], shared.daemon.env)
      expect(result.exitCode, flags.join(' ')).toBe(2)
      expect(result.stderr, flags.join(' ')).toMatch(message)
      expect(result.stdout).toBe('')
    }
    expect((await shared.daemon.client.list({ all: true })).length).toBe(before)
  })

  test('resize of a task without a terminal exits 1 with the reason; a bad COLS or ROWS exits 2', async () => {
    const plain = await runOnTerminal(['--', 'sleep', '30'])
    const refused = await runCli(['resize', plain.id, '100', '30'], shared.daemon.env)
    expect(refused.exitCode).toBe(1)
    expect(refused.stderr).toContain(`task ${plain.id} has no terminal`)
    const json = await runCli(['--json', 'resize', plain.id, '100', '30'], shared.daemon.env)
    expect(JSON.parse(json.stdout)).toMatchObject({ error: { code: 'TEND_ERR_NO_TTY', statusCode: 409 } })
    for (const [cols, rows] of [
      ['0', '30'],
      ['100', '10001'],
      ['x', '1'],
    ]) {
      const bad = await runCli(['resize', plain.id, cols!, rows!], shared.daemon.env)
      expect(bad.exitCode, `${cols} ${rows}`).toBe(2)
      expect(bad.stderr).toMatch(/is invalid for argument '(cols|rows)'\. expected a whole number from 1 to 10000/)
    }
  })
})

describe('tend send on a terminal', () => {
  test('send types a line into sh on a terminal, which echoes it and runs it; --eof types Ctrl-D and sh exits', async () => {
    const task = await runOnTerminal(['--tty', '--env', 'PS1=$ ', '--', 'sh'])
    await waitFor('the prompt', () => rawOutputOf(task).includes('$ '))
    const sent = await runCli(['send', task.id, 'echo $((6 * 7))'], shared.daemon.env)
    expect(sent).toMatchObject({ exitCode: 0, stdout: `16 bytes sent to ${task.id}\n` })
    await waitFor('the answer', () => rawOutputOf(task).includes('42\r\n'))
    // The terminal echoed the typed line, with a terminal's line end.
    expect(rawOutputOf(task)).toContain('echo $((6 * 7))\r\n')

    const eof = await runCli(['send', task.id, '--eof'], shared.daemon.env)
    expect(eof).toMatchObject({ exitCode: 0, stdout: `0 bytes sent to ${task.id}; Ctrl-D typed (end of input)\n` })
    expect(await shared.daemon.client.wait(task.id, { timeoutMs: 10_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
    expect(readFileSync(join(task.spool, 'input.log'), 'utf8')).toBe('echo $((6 * 7))\n\u0004')
  })

  test('send --help says --eof types Ctrl-D on a terminal', async () => {
    const help = await runCli(['send', '--help'], shared.daemon.env)
    expect(help.stdout.replace(/\s+/g, ' ')).toContain('on a terminal (tend run --tty) it types Ctrl-D instead, and the terminal stays open')
  })
})

describe('tend logs --plain', () => {
  const PROGRAM = [
    'printf "\\033]0;build: step 1\\007\\033[32mcompiling\\033[0m\\r\\n"',
    'printf "\\r 10%%"',
    'printf "\\r 50%%"',
    'printf "\\r\\033[K100%%\\r\\n"',
    'printf "done \\342\\234\\223\\n"',
  ].join('; ')
  const PLAIN = 'compiling\n100%\ndone ✓\n'

  test('prints the text without control sequences or \\r; plain logs leave output.log raw', async () => {
    const task = await runOnTerminal(['--tty', '-c', `${PROGRAM}; sleep 30`])
    await waitFor('the output to end', () => rawOutputOf(task).includes('done ✓\r\n'))
    const raw = await runCli(['logs', task.id], shared.daemon.env)
    // printf's \r\n reaches output.log as \r\r\n: the terminal turns every \n into \r\n.
    expect(raw.stdout).toContain('\x1b[32mcompiling\x1b[0m\r\r\n')
    expect(raw.stdout).toBe(rawOutputOf(task))
    const plain = await runCli(['logs', '--plain', task.id], shared.daemon.env)
    expect(plain).toEqual({ exitCode: 0, stdout: PLAIN, stderr: '' })
    expect(plain.stdout).not.toMatch(/[\x1b\r]/)
    expect(rawOutputOf(task)).toBe(raw.stdout)

    const tail = await runCli(['logs', '--plain', '--tail', '1', task.id], shared.daemon.env)
    expect(tail.stdout).toBe('done ✓\n')
    const json = JSON.parse((await runCli(['--json', 'logs', '--plain', task.id], shared.daemon.env)).stdout)
    expect(json).toMatchObject({ data: PLAIN, encoding: 'utf8', from: 0, next: Buffer.byteLength(raw.stdout), done: false })
  })

  test('--follow --plain streams the text, a redrawn progress line once, until the task ends, however the reads fall', async () => {
    const gate = join(shared.workspace, 'plain-follow-gate')
    const task = await runOnTerminal([
      '--tty',
      '-c',
      `printf 'start\\r\\n\\r 10%%'; while [ ! -e '${gate}' ]; do sleep 0.02; done; printf '\\r 50%%\\r100%%\\r\\nend\\r\\n'`,
    ])
    const follower = execa(process.execPath, [TEND_BIN, 'logs', '--plain', '-f', task.id], {
      env: shared.daemon.env,
      extendEnv: false,
      reject: false,
      stdin: 'ignore',
      timeout: 30_000,
      stripFinalNewline: false,
    })
    let printed = ''
    follower.stdout!.on('data', (chunk: Buffer) => (printed += chunk.toString()))
    await waitFor('logs --plain -f to print the first line while the task runs', () => printed === 'start\n')
    expect((await shared.daemon.client.get(task.id)).state).toBe('running')
    writeFileSync(gate, '')
    const result = await follower
    expect(result.exitCode, String(result.stderr)).toBe(0)
    expect(printed).toBe('start\n100%\nend\n')
  })
})
