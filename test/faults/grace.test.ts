import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import type { SandboxProfile } from '../../protocol/index.js'
import { startTestDaemon, UNPRIVILEGED_USER, type TestDaemon } from '../helpers/test-daemon.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait-for.js'

// Workspaces outside /tmp: a sandboxed task has a private /tmp.
const base = mkdtempSync('/var/tmp/tend-grace-')
// Others may enter it: a root daemon's sandboxed tasks run on a uid of their own, which must reach their cwd.
chmodSync(base, 0o711)
let daemon: TestDaemon
let profiles: readonly string[] = []
let missing: Record<string, string | undefined> = {}

beforeAll(async () => {
  // A grace period that a child's 0.3 s of cleaning up fits in with room to spare on a loaded
  // machine; the tests of a grace running out pass their own.
  daemon = await startTestDaemon({ env: { TEND_KILL_GRACE: '2s' } })
  const { sandbox } = await daemon.client.status()
  profiles = sandbox.profiles
  missing = sandbox.missing
})
afterAll(async () => {
  try {
    await daemon.stop()
  } finally {
    rmSync(base, { recursive: true, force: true })
  }
})

/**
 * The main shell starts a child and then dies on TERM (the default action); the child handles
 * TERM with `handler`, and says it is ready once its trap is set.
 */
function treeWithChild(handler: string): string {
  return `( trap '${handler}' TERM; echo ready > child-ready; while :; do sleep 0.05; done ) & while [ ! -e child-ready ]; do sleep 0.01; done; echo ready; wait`
}

async function startReady(sandbox: SandboxProfile, line: string): Promise<{ id: string; workspace: string }> {
  const workspace = mkdtempSync(join(base, `${sandbox}-`))
  const started = await daemon.client.start({ command: line, shell: true, cwd: workspace, sandbox })
  await waitFor(`task ${started.id} (${sandbox}) to print ready`, async () => (await daemon.client.read(started.id)).data.includes('ready'))
  return { id: started.id, workspace }
}

function leftOf(id: string): number[] {
  return processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive)
}

describe.each(['workspace', 'strict', 'off'] as const)('the grace period under sandbox %s', (sandbox) => {
  const available = (_context: unknown) => {
    expect(profiles, `sandbox ${sandbox} is not available here: ${missing[sandbox] ?? 'unknown reason'}`).toContain(sandbox)
  }

  test('a child that needs 0.3 s to clean up after TERM finishes it within --grace 2s, 5 times out of 5, though the main process dies at once', async (context) => {
    available(context)
    const cleaned: boolean[] = []
    for (let round = 0; round < 5; round += 1) {
      const { id, workspace } = await startReady(sandbox, treeWithChild('sleep 0.3; echo cleaned > cleaned-up; exit 0'))
      const task = await daemon.client.kill(id, { graceMs: 2000 })
      expect(task).toMatchObject({ state: 'killed', signal: 'SIGTERM', reason: 'killed by request (SIGTERM)' })
      // kill answers once no process of the task is left.
      expect(leftOf(id)).toEqual([])
      cleaned.push(existsSync(join(workspace, 'cleaned-up')))
    }
    expect(cleaned).toEqual([true, true, true, true, true])
  })

  test('a child that ignores TERM is killed after the grace period, and nothing of the task is left', async (context) => {
    available(context)
    const { id } = await startReady(sandbox, treeWithChild(''))
    const task = await daemon.client.kill(id, { graceMs: 300 })
    expect(task.state).toBe('killed')
    expect(task.reason).toBe('killed by request (SIGTERM)')
    expect(leftOf(id)).toEqual([])
  })

  test('a timeout gives the children their grace period too', async (context) => {
    available(context)
    const workspace = mkdtempSync(join(base, `${sandbox}-timeout-`))
    // The timeout comes after the child is ready: the task waits for it before it starts sleeping.
    const line = treeWithChild('sleep 0.3; echo cleaned > cleaned-up; exit 0').replace('; wait', '; sleep 600')
    const started = await daemon.client.start({ command: line, shell: true, cwd: workspace, sandbox, timeoutMs: 3000 })
    const task = await daemon.client.wait(started.id)
    expect(task).toMatchObject({ state: 'timed_out', signal: 'SIGTERM' })
    expect(existsSync(join(workspace, 'cleaned-up'))).toBe(true)
    await waitFor(`no process of task ${started.id} left`, () => leftOf(started.id).length === 0)
  })

  test('a kill right after the start, before the command may even run, ends the task and leaves nothing', async (context) => {
    available(context)
    const workspace = mkdtempSync(join(base, `${sandbox}-early-`))
    const started = await daemon.client.start({ command: ['sleep', '600'], cwd: workspace, sandbox })
    await waitFor(`task ${started.id} to run`, async () => (await daemon.client.get(started.id)).state === 'running', 10_000)
    const task = await daemon.client.kill(started.id, { graceMs: 2000 })
    expect(task.state).toBe('killed')
    expect(leftOf(started.id)).toEqual([])
  })

  test('a task that exits by itself still takes its background children with it', async (context) => {
    available(context)
    const workspace = mkdtempSync(join(base, `${sandbox}-bg-`))
    const started = await daemon.client.start({
      command: `( trap '' TERM; echo up > bg-ready; exec sleep 600 ) & while [ ! -e bg-ready ]; do sleep 0.01; done; echo leader-exits`,
      shell: true,
      cwd: workspace,
      sandbox,
    })
    const task = await daemon.client.wait(started.id)
    expect(task).toMatchObject({ state: 'exited', exitCode: 0 })
    await waitFor(`no process of task ${started.id} left`, () => leftOf(started.id).length === 0)
  })
})

test('stopping the daemon gives the children of every profile their grace period', async (context) => {
  const own = await startTestDaemon({ env: { TEND_KILL_GRACE: '2s' } })
  let stopped = false
  try {
    const usable = (['workspace', 'strict', 'off'] as const).filter((profile) => profiles.includes(profile))
    expect(usable.length, `not every profile is available here: ${JSON.stringify(missing)}`).toBe(3)
    const tasks: Array<{ id: string; workspace: string }> = []
    for (const sandbox of usable) {
      const workspace = mkdtempSync(join(base, `${sandbox}-daemon-stop-`))
      const started = await own.client.start({ command: treeWithChild('sleep 0.3; echo cleaned > cleaned-up; exit 0'), shell: true, cwd: workspace, sandbox })
      await waitFor(`task ${started.id} to print ready`, async () => (await own.client.read(started.id)).data.includes('ready'))
      tasks.push({ id: started.id, workspace })
    }
    stopped = true
    await own.stop()
    expect(tasks.map(({ workspace }) => existsSync(join(workspace, 'cleaned-up')))).toEqual(usable.map(() => true))
    expect(tasks.flatMap(({ id }) => leftOf(id))).toEqual([])
  } finally {
    if (!stopped) await own.stop()
  }
})

test(`a daemon as the non-root user ${UNPRIVILEGED_USER} gives a sandboxed task's children their grace period too`, async () => {
  const own = await startTestDaemon({ user: 'unprivileged', env: { TEND_KILL_GRACE: '500ms' } })
  const workspaces: string[] = []
  try {
    const { sandbox } = await own.client.status()
    for (const profile of (['workspace', 'strict'] as const).filter((each) => sandbox.profiles.includes(each))) {
      // Straight under /var/tmp: the suite's own folder is root's alone.
      const workspace = mkdtempSync(`/var/tmp/tend-grace-non-root-${profile}-`)
      workspaces.push(workspace)
      chownSync(workspace, own.uid, own.gid)
      const started = await own.client.start({
        command: treeWithChild('sleep 0.3; echo cleaned > cleaned-up; exit 0'),
        shell: true,
        cwd: workspace,
        sandbox: profile,
      })
      await waitFor(`task ${started.id} (${profile}) to print ready`, async () => (await own.client.read(started.id)).data.includes('ready'))
      const task = await own.client.kill(started.id, { graceMs: 2000 })
      expect(task).toMatchObject({ state: 'killed', signal: 'SIGTERM' })
      expect({ profile, cleaned: existsSync(join(workspace, 'cleaned-up')) }).toEqual({ profile, cleaned: true })
      expect(leftOf(started.id)).toEqual([])
    }
  } finally {
    await own.stop()
    for (const workspace of workspaces) rmSync(workspace, { recursive: true, force: true })
  }
})
