import { afterEach, describe, expect, test } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { FIXTURES, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'

// Both spawners must start a task the same way: the native helper (the default where it was built)
// and the child_process fallback (TEND_SPAWNER=node).
const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

describe.each(['native', 'node'] as const)('the %s spawner', (spawner) => {
  async function daemonWith(): Promise<TestDaemon> {
    const daemon = await startTestDaemon({ env: { TEND_SPAWNER: spawner } })
    cleanups.push(() => daemon.stop())
    return daemon
  }

  test('status names it, and a task gets its argv, env, cwd, limits, a new session and /dev/null as stdin', async () => {
    const daemon = await daemonWith()
    expect((await daemon.client.status()).spawner).toBe(spawner)
    const cwd = mkdtempSync(join(tmpdir(), 'tend-spawner-'))
    cleanups.push(() => rmSync(cwd, { recursive: true, force: true }))
    const script = 'printf "%s|" "$@"; echo; echo "$GREETING"; pwd; ulimit -c; ulimit -n; cat; ps -o sid= -p $$ | tr -d " "; echo $$'
    const task = await daemon.client.start({ command: ['sh', '-c', script, 'sh', 'two words', '', 'ünï'], cwd, env: { GREETING: 'hi there' } })
    const ended = await daemon.client.wait(task.id)
    expect(ended).toMatchObject({ state: 'exited', exitCode: 0 })
    const lines = (await daemon.client.read(task.id)).data.split('\n')
    expect(lines.slice(0, 5)).toEqual(['two words||ünï|', 'hi there', cwd, '0', '4096'])
    // `cat` read /dev/null and printed nothing; the shell leads its own session.
    expect(lines[5]).toBe(lines[6])
  })

  test('a missing program and a missing cwd fail with the reason; exit codes and signals are recorded', async () => {
    const daemon = await daemonWith()
    const missing = await daemon.client.wait((await daemon.client.start({ command: ['/no/such/program'] })).id)
    expect(missing).toMatchObject({ state: 'failed', reason: 'no such program: /no/such/program' })
    const noCwd = await daemon.client.wait((await daemon.client.start({ command: ['true'], cwd: '/no/such/dir' })).id)
    expect(noCwd).toMatchObject({ state: 'failed', reason: 'cwd does not exist: /no/such/dir' })
    const three = await daemon.client.wait((await daemon.client.start({ command: ['sh', '-c', 'exit 3'] })).id)
    expect(three).toMatchObject({ state: 'exited', exitCode: 3 })
    const signalled = await daemon.client.wait((await daemon.client.start({ command: ['sh', '-c', 'kill -USR1 $$'] })).id)
    expect(signalled).toMatchObject({ state: 'killed', signal: 'SIGUSR1' })
  })

  test('stopping the daemon while tasks are still being launched leaves none of them running', async () => {
    const daemon = await daemonWith()
    const started = await Promise.all(Array.from({ length: 20 }, () => daemon.client.start({ command: ['sleep', '1000'] })))
    await daemon.stop()
    for (const task of started) expect(processesWithEnv(`TEND_TASK_ID=${task.id}`).filter(isAlive)).toEqual([])
  })

  test('kills right after starts (some land while the task is being launched) answer only once no process of it is left', async () => {
    const daemon = await daemonWith()
    for (let round = 0; round < 5; round++) {
      const tasks = await Promise.all(Array.from({ length: 8 }, () => daemon.client.start({ command: ['sleep', '1000'] })))
      const killed = await Promise.all(tasks.map((task) => daemon.client.kill(task.id)))
      for (const task of killed) {
        expect(task.state).toBe('killed')
        expect(processesWithEnv(`TEND_TASK_ID=${task.id}`).filter(isAlive)).toEqual([])
      }
    }
  })

  test('stdout and stderr land in output.log interleaved exactly as written', async () => {
    const daemon = await daemonWith()
    const task = await daemon.client.start({ command: ['sh', join(FIXTURES, 'interleave.sh'), '30'] })
    expect(await daemon.client.wait(task.id)).toMatchObject({ state: 'exited', exitCode: 0 })
    const expected = Array.from({ length: 30 }, (_, index) => `out ${index + 1}\nerr ${index + 1}\n`).join('')
    expect((await daemon.client.read(task.id)).data).toBe(expected)
  })
})
