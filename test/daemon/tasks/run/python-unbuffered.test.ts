import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import { startTestDaemon, type TestDaemon } from '../../../helpers/test-daemon.js'
import { waitFor } from '../../../helpers/wait-for.js'

/*
 * Tasks' environment has PYTHONUNBUFFERED=1 unless the daemon's pythonUnbuffered setting is off:
 * a Python server's "Serving HTTP…" line is readable while it runs, not at its end. A task's own
 * env wins.
 */

let daemon: TestDaemon
let unbufferedOff: TestDaemon
let workspace: string
/** The test runner's own value (a CI may set it): the daemons start without it, as a plain shell would. */
const inherited = process.env.PYTHONUNBUFFERED

beforeAll(async () => {
  delete process.env.PYTHONUNBUFFERED
  ;[daemon, unbufferedOff] = await Promise.all([startTestDaemon(), startTestDaemon({ env: { TEND_PYTHON_UNBUFFERED: '0' } })])
  workspace = mkdtempSync('/var/tmp/tend-python-unbuffered-')
  // A root daemon's sandboxed tasks run on a uid of their own, which must reach their cwd.
  chmodSync(workspace, 0o711)
})
afterAll(async () => {
  await Promise.all([daemon?.stop(), unbufferedOff?.stop()])
  rmSync(workspace, { recursive: true, force: true })
  if (inherited !== undefined) process.env.PYTHONUNBUFFERED = inherited
})

const ENV_LINE = ['sh', '-c', 'echo "PYTHONUNBUFFERED=[${PYTHONUNBUFFERED-unset}]"']

async function outputOf(on: TestDaemon, options: { env?: Record<string, string>; sandbox?: 'workspace' } = {}): Promise<string> {
  const started = await on.client.start({ command: ENV_LINE, cwd: workspace, ...options })
  await on.client.wait(started.id)
  return (await on.client.read(started.id, { from: 0 })).data
}

describe('PYTHONUNBUFFERED in tasks', () => {
  test("a python3 task's printed line is readable while it runs", async () => {
    const started = await daemon.client.start({
      command: ['python3', '-c', "import sys, time; print('Serving HTTP on 0.0.0.0 port 8000'); sys.stdin.read()"],
      cwd: workspace,
      stdin: 'pipe',
    })
    try {
      await waitFor('the line printed before the task waits on its stdin', async () =>
        (await daemon.client.read(started.id, { from: 0 })).data.includes('Serving HTTP on 0.0.0.0 port 8000\n'),
      )
      expect((await daemon.client.get(started.id)).state).toBe('running')
    } finally {
      await daemon.client.input(started.id, '', { eof: true })
      await daemon.client.wait(started.id)
    }
  })

  test('it is 1 with sandbox off and in a sandbox; a task’s own value wins', async () => {
    expect(await outputOf(daemon)).toBe('PYTHONUNBUFFERED=[1]\n')
    expect(await outputOf(daemon, { sandbox: 'workspace' })).toBe('PYTHONUNBUFFERED=[1]\n')
    expect(await outputOf(daemon, { env: { PYTHONUNBUFFERED: '' } })).toBe('PYTHONUNBUFFERED=[]\n')
    expect(await outputOf(daemon, { sandbox: 'workspace', env: { PYTHONUNBUFFERED: '' } })).toBe('PYTHONUNBUFFERED=[]\n')
  })

  test('the pythonUnbuffered setting off (TEND_PYTHON_UNBUFFERED=0) leaves it unset', async () => {
    expect(await outputOf(unbufferedOff)).toBe('PYTHONUNBUFFERED=[unset]\n')
    expect(await outputOf(unbufferedOff, { sandbox: 'workspace' })).toBe('PYTHONUNBUFFERED=[unset]\n')
  })
})
