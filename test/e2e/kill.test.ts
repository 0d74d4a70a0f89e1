import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { FIXTURES, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait-for.js'

let daemon: TestDaemon
let scratch: string

beforeAll(async () => {
  daemon = await startTestDaemon({ env: { TEND_KILL_GRACE: '500ms' } })
  scratch = mkdtempSync(join(tmpdir(), 'tend-kill-'))
})
afterAll(async () => {
  await daemon.stop()
  rmSync(scratch, { recursive: true, force: true })
})

const pidsIn = (dir: string) => ['setsid', 'orphan', 'ignore-term'].map((name) => Number(readFileSync(join(dir, `${name}.pid`), 'utf8')))

async function startEscapingTree(): Promise<{ id: string; pids: number[] }> {
  const dir = mkdtempSync(join(scratch, 'tree-'))
  const task = await daemon.client.start({ command: ['sh', join(FIXTURES, 'escaping-tree.sh'), dir] })
  const pids = await waitFor('all three escapees to write their pids', () => {
    try {
      const found = pidsIn(dir)
      return found.every((pid) => pid > 0) ? found : undefined
    } catch {
      return undefined
    }
  })
  return { id: task.id, pids }
}

describe('kill', () => {
  test('kill stops a tree with a setsid grandchild, a double fork and a TERM-ignoring child, leaving no survivor', async () => {
    const { id, pids } = await startEscapingTree()
    expect(pids.every(isAlive)).toBe(true)
    const task = await daemon.client.kill(id)
    expect(task).toMatchObject({ state: 'killed', reason: 'killed by request (SIGTERM)' })
    // kill answers after the tree is gone: no waiting needed here.
    expect(pids.filter(isAlive)).toEqual([])
    expect(processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive)).toEqual([])
  })

  test('a timeout stops the whole tree and reads timed_out', async () => {
    const dir = mkdtempSync(join(scratch, 'tree-'))
    const started = await daemon.client.start({ command: ['sh', join(FIXTURES, 'escaping-tree.sh'), dir], timeoutMs: 1500 })
    const task = await daemon.client.wait(started.id)
    expect(task).toMatchObject({ state: 'timed_out', reason: 'timed out after 1.5s' })
    expect(pidsIn(dir).filter(isAlive)).toEqual([])
  })

  test('when the main process exits, processes it left behind are killed too', async () => {
    const dir = mkdtempSync(join(scratch, 'bg-'))
    const started = await daemon.client.start({
      command: `setsid sh -c 'echo $$ > ${dir}/bg.pid; exec sleep 1000' & while [ ! -s ${dir}/bg.pid ]; do :; done; echo done`,
      shell: true,
    })
    const task = await daemon.client.wait(started.id)
    expect(task).toMatchObject({ state: 'exited', exitCode: 0 })
    expect(isAlive(Number(readFileSync(join(dir, 'bg.pid'), 'utf8')))).toBe(false)
  })

  test('a custom signal that the task handles ends it without KILL, and the signal is recorded', async () => {
    const started = await daemon.client.start({ command: `trap 'echo got INT; exit 0' INT; echo ready; while :; do sleep 0.05; done`, shell: true })
    await waitFor('the task to print ready', async () => (await daemon.client.read(started.id)).data.includes('ready'))
    const task = await daemon.client.kill(started.id, { signal: 'INT', graceMs: 5000 })
    expect(task.state).toBe('killed')
    expect(task.reason).toBe('killed by request (SIGINT)')
    expect((await daemon.client.read(started.id)).data).toContain('got INT')
  })

  test('killing a queued task cancels it before it starts', async () => {
    const busy = await startTestDaemon({ env: { TEND_CONCURRENCY: '1' } })
    try {
      const blocker = await busy.client.start({ command: ['sleep', '1000'] })
      const queued = await busy.client.start({ command: ['echo', 'never'] })
      expect((await busy.client.get(queued.id)).state).toBe('queued')
      const cancelled = await busy.client.kill(queued.id)
      expect(cancelled).toMatchObject({ state: 'killed', startedAt: null, reason: 'killed before it started' })
      await busy.client.kill(blocker.id)
      expect((await busy.client.read(queued.id)).data).toBe('')
    } finally {
      await busy.stop()
    }
  })

  test('killing a finished task answers its final record unchanged', async () => {
    const started = await daemon.client.start({ command: ['true'] })
    const finished = await daemon.client.wait(started.id)
    expect(await daemon.client.kill(started.id)).toEqual(finished)
  })

  test('a process that cleared its environment and left the session is still found through the task cgroup', async (context) => {
    const { sandbox } = await daemon.client.status()
    expect(sandbox.cgroups.pids, 'no writable cgroup v1 pids controller on this machine').toBeTruthy()
    const dir = mkdtempSync(join(scratch, 'envless-'))
    const escapee = `env -i /usr/bin/setsid /bin/sh -c 'echo $$ > ${dir}/$1.pid; exec sleep 1000' sh`
    const exits = await daemon.client.start({ command: `${escapee} exits & while [ ! -s ${dir}/exits.pid ]; do :; done`, shell: true })
    expect((await daemon.client.wait(exits.id)).state).toBe('exited')
    const killed = await daemon.client.start({ command: `${escapee} killed & sleep 1000`, shell: true })
    const pid = await waitFor('the escapee to start', () => {
      try {
        return Number(readFileSync(join(dir, 'killed.pid'), 'utf8')) || undefined
      } catch {
        return undefined
      }
    })
    expect(processesWithEnv(`TEND_TASK_ID=${killed.id}`)).not.toContain(pid)
    await daemon.client.kill(killed.id)
    expect(isAlive(pid)).toBe(false)
    expect(isAlive(Number(readFileSync(join(dir, 'exits.pid'), 'utf8')))).toBe(false)
  })

  test('twenty tasks killed at once, each with a TERM-ignoring escapee, all end and leave nothing', async () => {
    const many = await startTestDaemon({ env: { TEND_CONCURRENCY: '20', TEND_PER_OWNER_CONCURRENCY: '20', TEND_KILL_GRACE: '500ms' } })
    try {
      const { sandbox } = await many.client.status()
      const profiles = (['off', 'workspace', 'strict'] as const).filter((profile) => sandbox.profiles.includes(profile))
      const dir = mkdtempSync('/var/tmp/tend-kill-many-')
      try {
        const line = `setsid sh -c 'trap "" TERM; echo up > $0; exec sleep 1000' started-$$ & while [ ! -s started-$$ ]; do sleep 0.01; done; echo ready; sleep 1000`
        const started = await Promise.all(
          Array.from({ length: 20 }, (_, index) => many.client.start({ command: line, shell: true, cwd: dir, sandbox: profiles[index % profiles.length] })),
        )
        for (const task of started) await waitFor(`task ${task.id} to print ready`, async () => (await many.client.read(task.id)).data.includes('ready'))
        const killed = await Promise.all(started.map((task) => many.client.kill(task.id)))
        expect(killed.map((task) => task.state)).toEqual(started.map(() => 'killed'))
        expect(started.flatMap((task) => processesWithEnv(`TEND_TASK_ID=${task.id}`).filter(isAlive))).toEqual([])
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    } finally {
      await many.stop()
    }
  })

  test('an unknown signal name is refused with a clear error', async () => {
    const started = await daemon.client.start({ command: ['sleep', '1000'] })
    await expect(daemon.client.kill(started.id, { signal: 'SIGBOGUS' })).rejects.toMatchObject({ code: 'TEND_ERR_INVALID_SIGNAL' })
    await daemon.client.kill(started.id)
  })
})
