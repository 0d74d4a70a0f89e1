import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { runCli } from '../helpers/cli.js'
import { checkUnprivilegedUser, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'

/*
 * A root daemon started from an npm script has node_modules/.bin of every folder above the project
 * first on PATH, and one of them may be another user's. Every program the daemon runs by name
 * (bubblewrap, and the few tools it asks: flock, chattr, getent, id) is looked up only in folders
 * that root alone can change: a program planted in the test user's folder first on PATH is never
 * run, and status names the folder it passed over and why.
 */

/** The programs the daemon looks up on PATH. */
const LOOKED_UP = ['bwrap', 'flock', 'chattr', 'getent', 'id']

describe("a root daemon whose PATH begins with another user's folder", () => {
  let daemon: TestDaemon
  let scratch: string
  let planted: string
  let markers: string
  let workspace: string

  beforeAll(async () => {
    const other = checkUnprivilegedUser()
    scratch = mkdtempSync(join(tmpdir(), 'tend-unsafe-path-'))
    planted = join(scratch, 'node_modules', '.bin')
    mkdirSync(planted, { recursive: true })
    markers = join(scratch, 'ran')
    mkdirSync(markers)
    chmodSync(markers, 0o777)
    for (const name of LOOKED_UP) {
      // Each would leave a mark, then do the real thing: a daemon that used it would work, and say nothing.
      writeFileSync(join(planted, name), `#!/bin/sh\n: > ${markers}/${name}\nexec /usr/bin/${name} "$@"\n`)
      chmodSync(join(planted, name), 0o755)
      chownSync(join(planted, name), other.uid, other.gid)
    }
    chownSync(planted, other.uid, other.gid)
    chownSync(join(scratch, 'node_modules'), other.uid, other.gid)
    chmodSync(scratch, 0o755)
    workspace = mkdtempSync(join(tmpdir(), 'tend-unsafe-path-ws-'))
    daemon = await startTestDaemon({ env: { PATH: `${planted}:/usr/bin:/bin`, TEND_SANDBOX: 'workspace' } })
  })
  afterAll(async () => {
    await daemon?.stop()
    rmSync(scratch, { recursive: true, force: true })
    rmSync(workspace, { recursive: true, force: true })
  })

  test('status names the real bubblewrap, and the entry passed over and why', async () => {
    const status = await daemon.client.status()
    expect(status.sandbox.bubblewrap?.path).toBe('/usr/bin/bwrap')
    expect(status.pathSkipped).toEqual([{ path: planted, reason: expect.stringMatching(/^it is writable by uid \d+ \(its owner\)$/) }])
    const cli = await runCli(['status'], daemon.env)
    expect(cli.stdout).toMatch(new RegExp(`skipped ${planted} on PATH: it is writable by uid \\d+ \\(its owner\\)`))
  })

  test('a sandboxed task runs, and no planted program ever did', async () => {
    const started = await daemon.client.start({ command: ['true'], cwd: workspace, sandbox: 'workspace' })
    expect(await daemon.client.wait(started.id, { timeoutMs: 30_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
    expect(readdirSync(markers)).toEqual([])
    expect(existsSync(join(markers, 'bwrap'))).toBe(false)
  })
})
