import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runCli } from '../helpers/cli.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * `tend console` opening the browser, with a fake xdg-open first on PATH that records its argv and
 * a copy of the file it was given (and that file's mode) as it was at that moment.
 */

let daemon: TestDaemon
let fakeBin: string
let records: string

beforeAll(async () => {
  daemon = await startTestDaemon()
  fakeBin = mkdtempSync(join(tmpdir(), 'tend-fake-xdg-open-'))
  records = mkdtempSync(join(tmpdir(), 'tend-xdg-open-records-'))
  const script = `#!/bin/sh
printf '%s\\n' "$@" > "$XDG_OPEN_RECORDS/argv"
for arg in "$@"; do
  path="\${arg#file://}"
  if [ -f "$path" ]; then
    printf '%s' "$path" > "$XDG_OPEN_RECORDS/path"
    stat -c %a "$path" > "$XDG_OPEN_RECORDS/mode"
    cp "$path" "$XDG_OPEN_RECORDS/file"
  fi
done
touch "$XDG_OPEN_RECORDS/done"
`
  writeFileSync(join(fakeBin, 'xdg-open'), script)
  chmodSync(join(fakeBin, 'xdg-open'), 0o755)
})

afterAll(async () => {
  await daemon?.stop()
  rmSync(fakeBin, { recursive: true, force: true })
  rmSync(records, { recursive: true, force: true })
})

describe('tend console opens the browser', () => {
  test('through a 0600 file in TEND_HOME that redirects with the token: the token is in no argv, and the file is gone once the page has used it', async () => {
    const env = { ...daemon.env, DISPLAY: ':99', PATH: `${fakeBin}:${daemon.env.PATH}`, XDG_OPEN_RECORDS: records }
    const opened = await runCli(['console'], env)
    expect(opened.exitCode, opened.stderr).toBe(0)
    // The operator still reads the URL with its token on stdout.
    const url = /^tend console: (\S+)$/m.exec(opened.stdout)?.[1]
    expect(url).toMatch(/\?token=[A-Za-z0-9_-]{40,}$/)
    const token = new URL(url!).searchParams.get('token')!
    await waitFor('the fake xdg-open to have run', () => existsSync(join(records, 'done')))
    const argv = readFileSync(join(records, 'argv'), 'utf8')
    expect(argv).not.toContain(token)
    const path = readFileSync(join(records, 'path'), 'utf8')
    expect(path.startsWith(`${daemon.home}/`), `${path} is in TEND_HOME`).toBe(true)
    expect(argv.trim()).toBe(`file://${path}`)
    expect(readFileSync(join(records, 'mode'), 'utf8').trim()).toBe('600')
    const page = readFileSync(join(records, 'file'), 'utf8')
    expect(page).toMatch(/<meta http-equiv="refresh" content="0; url=([^"]+)">/)
    expect(/<meta http-equiv="refresh" content="0; url=([^"]+)">/.exec(page)![1]).toBe(url)
    // The browser follows it: a session starts, and the file has served its purpose.
    const answer = await fetch(url!, { redirect: 'manual' })
    expect(answer.status).toBe(303)
    await waitFor(`the redirect file ${path} removed once used`, () => !existsSync(path))
  })
})
