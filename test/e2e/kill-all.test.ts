import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { execa } from 'execa'
import type { Task } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { startTestDaemon, TEND_BIN, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * `tend kill --all [--owner O]` stops every running and queued task (one owner's with --owner),
 * and asks first: it lists how many and which on a terminal, acts on "y", and without a terminal
 * refuses (exit 2, naming --yes) unless --yes is given.
 */

let daemon: TestDaemon

beforeAll(async () => {
  daemon = await startTestDaemon()
})
afterAll(async () => {
  await daemon?.stop()
})

async function sleeper(owner: string, name: string): Promise<Task> {
  const started = await daemon.client.start({ command: ['sleep', '600'], owner, name })
  await waitFor(`task ${started.id} to run`, async () => (await daemon.client.get(started.id)).state === 'running')
  return started
}

async function stateOf(id: string): Promise<string> {
  return (await daemon.client.get(id)).state
}

/** The CLI on a pseudo-terminal (util-linux's script), `answer` typed into it. */
async function onTerminal(args: string[], answer: string): Promise<{ exitCode: number; output: string }> {
  const command = [process.execPath, TEND_BIN, ...args].map((part) => `'${part}'`).join(' ')
  const result = await execa('script', ['-qec', command, '/dev/null'], { env: daemon.env, extendEnv: false, reject: false, input: answer, timeout: 30_000 })
  return { exitCode: result.exitCode ?? -1, output: String(result.stdout) }
}

describe('tend kill --all', () => {
  test('without a terminal and without --yes it refuses, naming --yes and what it would kill; nothing is killed', async () => {
    const task = await sleeper('alice', 'refused-one')
    const refused = await runCli(['kill', '--all'], daemon.env)
    expect(refused.exitCode).toBe(2)
    expect(refused.stderr).toMatch(/--yes/)
    expect(refused.stderr).toContain(task.id)
    expect(await stateOf(task.id)).toBe('running')
    await daemon.client.kill(task.id)
  })

  test('--owner with --yes kills every task of that owner, and only those', async () => {
    const mine = [await sleeper('alice', 'a1'), await sleeper('alice', 'a2')]
    const theirs = await sleeper('bob', 'b1')
    const killed = await runCli(['kill', '--all', '--owner', 'alice', '--yes', '--json'], daemon.env)
    expect(killed.exitCode, killed.stderr).toBe(0)
    const records = JSON.parse(killed.stdout) as Task[]
    expect(records.map((each) => each.id).sort()).toEqual(mine.map((each) => each.id).sort())
    for (const each of mine) expect(await stateOf(each.id)).toBe('killed')
    expect(await stateOf(theirs.id)).toBe('running')
    const text = await runCli(['kill', '--all', '--yes'], daemon.env)
    expect(text.exitCode, text.stderr).toBe(0)
    expect(text.stdout).toContain(theirs.id)
    expect(await stateOf(theirs.id)).toBe('killed')
  })

  test('on a terminal it asks, listing how many and which: "n" kills nothing, "y" kills them', async () => {
    const task = await sleeper('carol', 'asked')
    const declined = await onTerminal(['kill', '--all', '--owner', 'carol'], 'n\n')
    expect(declined.output).toMatch(/kill 1 task of owner carol\?/)
    expect(declined.output).toContain(task.id)
    expect(declined.output).toContain('asked')
    expect(declined.exitCode).toBe(1)
    expect(await stateOf(task.id)).toBe('running')
    const accepted = await onTerminal(['kill', '--all', '--owner', 'carol'], 'y\n')
    expect(accepted.exitCode, accepted.output).toBe(0)
    expect(await stateOf(task.id)).toBe('killed')
  })

  test('with nothing to kill it says so and exits 0, without asking', async () => {
    const none = await runCli(['kill', '--all', '--owner', 'nobody-here'], daemon.env)
    expect(none.exitCode, none.stderr).toBe(0)
    expect(none.stderr).toMatch(/no running or queued tasks/)
  })

  test('an id with --all is refused', async () => {
    const both = await runCli(['kill', '--all', 'abcd'], daemon.env)
    expect(both.exitCode).toBe(2)
    expect(both.stderr).toMatch(/--all/)
  })
})
