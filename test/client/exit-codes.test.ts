import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runCli, type CliResult } from '../helpers/cli.js'
import { REPO_ROOT, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/**
 * The README's two exit-code tables, walked row by row: each row has at least one real CLI case
 * that produces its code, and a row this file has no case for fails the test (a new row needs one).
 */

interface ExitRow {
  table: 'wait' | 'other'
  /** The row's first cell, as written: `124`, `128+N`, `the task's exit code`. */
  cell: string
}

/** The rows of the two tables under README.md's "Exit codes". */
function readmeRows(): ExitRow[] {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8')
  const section = readme.split('### Exit codes')[1]?.split(/\n## /)[0] ?? ''
  const rows: ExitRow[] = []
  let table: ExitRow['table'] | null = null
  for (const line of section.split('\n')) {
    if (line.startsWith('| status |')) table = 'wait'
    else if (line.startsWith('| code |')) table = 'other'
    else if (!line.startsWith('|')) table = null
    else if (table !== null && !line.startsWith('| ---')) rows.push({ table, cell: line.split('|')[1]!.trim() })
  }
  return rows
}

interface ExitCase {
  title: string
  expected: number
  run: () => Promise<CliResult>
}

let daemon: TestDaemon
let env: Record<string, string>
let cwd: string

beforeAll(async () => {
  daemon = await startTestDaemon({ env: { TEND_SANDBOX: 'workspace' } })
  env = daemon.env
  cwd = mkdtempSync(join(tmpdir(), 'tend-exit-codes-'))
})
afterAll(async () => {
  await daemon?.stop()
  rmSync(cwd, { recursive: true, force: true })
})

const cli = (...args: string[]) => runCli(args, env)

/** A task that runs until killed; its id once it runs. */
async function sleeper(): Promise<string> {
  const { id } = await daemon.client.start({ command: ['sleep', '600'], cwd })
  await waitFor(`task ${id} to run`, async () => (await daemon.client.get(id)).state === 'running')
  return id
}

/** Each row's cases, by table and first cell. */
const CASES: Record<ExitRow['table'], Record<string, ExitCase[]>> = {
  wait: {
    "the task's exit code": [{ title: 'run --wait of `exit 7`', expected: 7, run: () => cli('run', '--wait', '--cwd', cwd, '-c', 'exit 7') }],
    '128+N': [
      {
        title: 'wait on a task killed by TERM',
        expected: 143,
        run: async () => {
          const id = await sleeper()
          await daemon.client.kill(id)
          return cli('wait', id)
        },
      },
    ],
    '124': [{ title: 'run --wait --timeout', expected: 124, run: () => cli('run', '--wait', '--cwd', cwd, '--timeout', '200ms', '--', 'sleep', '600') }],
    '127': [{ title: 'run --wait in a cwd that does not exist', expected: 127, run: () => cli('run', '--wait', '--cwd', join(cwd, 'missing'), '--', 'true') }],
    '125': [{ title: 'wait on a task that does not exist', expected: 125, run: () => cli('wait', 'nosuchtask00') }],
    '75': [
      {
        title: 'wait --timeout on a task that runs on',
        expected: 75,
        run: async () => {
          const id = await sleeper()
          const result = await cli('wait', '--timeout', '100ms', id)
          await daemon.client.kill(id, { signal: 'SIGKILL' })
          return result
        },
      },
    ],
    '76': [
      {
        title: 'run --wait-ready whose pattern never shows in time',
        expected: 76,
        run: async () => {
          const result = await cli('run', '--cwd', cwd, '--wait-ready', '--ready-pattern', 'never', '--ready-timeout', '300ms', '--', 'sleep', '600')
          await daemon.client.kill(result.stdout.trim(), { signal: 'SIGKILL' })
          return result
        },
      },
    ],
    '77': [
      {
        title: 'run --wait-ready of a task that ends first',
        expected: 77,
        run: () => cli('run', '--cwd', cwd, '--wait-ready', '--ready-pattern', 'never', '--', 'true'),
      },
    ],
    '2': [{ title: 'wait with a bad --timeout', expected: 2, run: () => cli('wait', '--timeout', 'soon', 'nosuchtask00') }],
  },
  other: {
    '0': [{ title: 'ps', expected: 0, run: () => cli('ps') }],
    '1': [
      { title: 'show of a task that does not exist', expected: 1, run: () => cli('show', 'nosuchtask00') },
      { title: 'rm of a task that does not exist', expected: 1, run: () => cli('rm', 'nosuchtask00') },
    ],
    '2': [
      { title: 'an unknown flag', expected: 2, run: () => cli('ps', '--no-such-flag') },
      { title: 'rm of a malformed reference', expected: 2, run: () => cli('rm', '') },
      { title: 'show of a malformed reference', expected: 2, run: () => cli('show', '') },
      { title: 'a --cluster URL that is not redis://', expected: 2, run: () => cli('ps', '--cluster', 'http://127.0.0.1:1') },
      { title: 'rm with a --cluster URL that is not redis://', expected: 2, run: () => cli('rm', 'nosuchtask00', '--cluster', 'http://127.0.0.1:1') },
      {
        title: 'a request the daemon rejects as invalid',
        expected: 2,
        run: () => cli('run', '--cwd', cwd, '--sandbox', 'off', '--memory', '1g', '--', 'true'),
      },
    ],
    '3': [
      { title: 'a daemon URL nothing answers', expected: 3, run: () => runCli(['ps'], { ...env, TEND_URL: 'http://127.0.0.1:1', TEND_TOKEN: 'x' }) },
      { title: 'rm on a cluster whose Redis cannot be reached', expected: 3, run: () => cli('rm', 'nosuchtask00', '--cluster', 'redis://127.0.0.1:1') },
    ],
  },
}

describe("the README's exit-code tables", () => {
  const rows = readmeRows()

  test('the README has both tables', () => {
    expect(rows.filter((row) => row.table === 'wait').length).toBeGreaterThan(5)
    expect(rows.filter((row) => row.table === 'other').length).toBeGreaterThan(3)
  })

  for (const row of rows) {
    test(`${row.table === 'wait' ? 'wait / run --wait' : 'every other command'}: ${row.cell}`, async () => {
      const cases = CASES[row.table][row.cell]
      expect(cases, `no CLI case produces the README row "${row.cell}": add one to CASES`).toBeDefined()
      for (const each of cases!) {
        const result = await each.run()
        expect(result.exitCode, `${each.title}: ${result.stderr}`).toBe(each.expected)
      }
    })
  }
})
