import { chmodSync, mkdtempSync } from 'node:fs'
import { join } from 'node:path'
import { beforeAll, describe, expect, test } from 'vitest'
import { daemonPerFile } from '../helpers/daemon-per-file.js'
import { runCli } from '../helpers/cli.js'

/*
 * What a record holds was chosen by whoever started the task (a prompt injection away from
 * hostile), so none of it may reach the operator's terminal as a control sequence: a title, a
 * clipboard write, a cleared screen or concealed text in `tend ps`, `tend show` or a warning. The
 * CLI prints control characters as visible escapes; only its own colours stay.
 */

const shared = daemonPerFile('terminal-safety', { env: { TEND_SANDBOX: 'workspace' } })

beforeAll(() => {
  // A root daemon's tasks run on a uid of their own, which must reach their cwd.
  chmodSync(shared.workspace, 0o711)
})

/** Control characters other than a newline and a tab: C0, DEL, C1, and the bidirectional overrides. */
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/

const HOSTILE_NAME = 'n\u001b]0;PWNED\u0007\u001b[2J\u001b[8mhidden\u009b31m\u202eevil\u001b[30mblack'

describe("a record's text reaches the operator's terminal only as visible text", () => {
  test('tend ps, tend show and the start warnings print control characters as escapes', async () => {
    const cwd = mkdtempSync(join(shared.workspace, 'ws-'))
    chmodSync(cwd, 0o777)
    const started = await runCli(['run', '--cwd', cwd, '--name', HOSTILE_NAME, '--', 'sh', '-c', 'echo hi > /tmp/a\u001b[2J\u001b[Hb'], shared.daemon.env)
    expect(started.exitCode, started.stderr).toBe(0)
    expect(started.stderr).toContain('\\u001b[2J')
    expect(started.stderr).not.toMatch(RAW_CONTROL)
    const id = shared.track(started.stdout.trim())
    await shared.daemon.client.wait(id)

    const listed = await runCli(['ps', '--all'], shared.daemon.env)
    expect(listed.exitCode, listed.stderr).toBe(0)
    expect(listed.stdout).toContain('n\\u001b]0;PWNED\\u0007\\u001b[2J\\u001b[8mhidden\\u009b31m\\u202eevil\\u001b[30mblack')
    expect(listed.stdout).not.toMatch(RAW_CONTROL)

    const shown = await runCli(['show', id], shared.daemon.env)
    expect(shown.exitCode, shown.stderr).toBe(0)
    expect(shown.stdout).toContain('\\u001b]0;PWNED')
    expect(shown.stdout).not.toMatch(RAW_CONTROL)

    // The record keeps its warnings as text too: every reader (an agent, the console) gets them safe.
    const record = await shared.daemon.client.get(id)
    expect(record.warnings?.join('\n')).toContain('\\u001b[2J')
    expect(record.warnings?.join('\n')).not.toMatch(RAW_CONTROL)

    // A name of many lines would forge rows of a table: each cell is one line.
    const forged = await runCli(['run', '--name', 'web\nwzzzzzzzzzzz  running  forged', '--', 'true'], shared.daemon.env)
    expect(forged.exitCode, forged.stderr).toBe(0)
    await shared.daemon.client.wait(shared.track(forged.stdout.trim()))
    const rows = await runCli(['ps', '--all'], shared.daemon.env)
    expect(rows.stdout).toContain('web\\u000awzzzzzzzzzzz  running  forged')
    expect(rows.stdout.split('\n').some((row) => row.startsWith('wzzzzzzzzzzz'))).toBe(false)

    // --json stays valid JSON, its strings the record's own.
    const json = await runCli(['show', '--json', id], shared.daemon.env)
    expect(json.stdout).not.toMatch(RAW_CONTROL)
    expect((JSON.parse(json.stdout) as { name: string }).name).toBe(HOSTILE_NAME)
  })
})
