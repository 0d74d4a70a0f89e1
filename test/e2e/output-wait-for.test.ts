import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { isTendError } from '../../client/index.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

let daemon: TestDaemon
const scratches: string[] = []

beforeAll(async () => {
  daemon = await startTestDaemon()
})
afterAll(async () => {
  await daemon.stop()
  for (const scratch of scratches) execFileSync('rm', ['-rf', scratch])
})

/** A folder the test's task waits in: each `touch go-N` there lets it write its N-th step. */
function scratchFolder(): string {
  const scratch = execFileSync('mktemp', ['-d']).toString().trim()
  scratches.push(scratch)
  return scratch
}

/** A task that writes `steps` one at a time, each after go-N appears in its cwd (printf: no newline unless the step has one). */
function steppedTask(steps: string[]): string {
  return steps.map((step, index) => `while [ ! -e go-${index + 1} ]; do sleep 0.01; done; printf '%s' '${step}'`).join('; ')
}

const pending = Symbol('pending')
/** The read has not answered yet (it is a long-poll still waiting). */
async function stillWaiting(read: Promise<unknown>): Promise<boolean> {
  // Two turns of the event loop let an answer already on its way land first.
  return (await Promise.race([read, new Promise((resolve) => setTimeout(() => resolve(pending), 50))])) === pending
}

describe('a read that waits for a line matching a pattern (waitFor)', () => {
  test('answers at the first new complete line that matches, with the output up to and including it', async () => {
    const scratch = scratchFolder()
    const started = await daemon.client.start({
      command: steppedTask(['booting\n', 'listening', ' on 8000\nnext line\n']),
      shell: true,
      cwd: scratch,
    })
    const read = daemon.client.read(started.id, { waitMs: 60_000, waitFor: 'listening on \\d+' })
    execFileSync('touch', [join(scratch, 'go-1')])
    await waitFor('the first line to be written', async () => (await daemon.client.read(started.id)).data === 'booting\n')
    expect(await stillWaiting(read)).toBe(true)
    execFileSync('touch', [join(scratch, 'go-2')])
    await waitFor('the matching line to be begun', async () => (await daemon.client.read(started.id)).data.endsWith('listening'))
    // The line matches already but is not complete: a new byte is no answer.
    expect(await stillWaiting(read)).toBe(true)
    execFileSync('touch', [join(scratch, 'go-3')])
    const answer = await read
    expect(answer).toMatchObject({ data: 'booting\nlistening on 8000\n', from: 0, next: 26, matched: { line: 'listening on 8000', end: 26 } })
    await daemon.client.wait(started.id)
  })

  test('lines before from are not looked at', async () => {
    const scratch = scratchFolder()
    const started = await daemon.client.start({ command: `echo ready 1; ${steppedTask(['ready 2\n'])}`, shell: true, cwd: scratch })
    await waitFor('the first line', async () => (await daemon.client.read(started.id)).data === 'ready 1\n')
    const read = daemon.client.read(started.id, { from: 8, waitMs: 60_000, waitFor: '^ready' })
    expect(await stillWaiting(read)).toBe(true)
    execFileSync('touch', [join(scratch, 'go-1')])
    expect(await read).toMatchObject({ data: 'ready 2\n', from: 8, next: 16, matched: { line: 'ready 2', end: 16 } })
    await daemon.client.wait(started.id)
  })

  test('when waitMs runs out, it answers what came, without a match', async () => {
    const started = await daemon.client.start({ command: 'echo one; echo two; sleep 30', shell: true })
    await waitFor('both lines', async () => (await daemon.client.read(started.id)).data === 'one\ntwo\n')
    const answer = await daemon.client.read(started.id, { waitMs: 200, waitFor: 'three' })
    expect(answer).toMatchObject({ data: 'one\ntwo\n', next: 8, done: false, state: 'running' })
    expect(answer.matched).toBeUndefined()
    await daemon.client.kill(started.id)
  })

  test('a task that ends without the line answers at its end; its last line counts without a newline', async () => {
    const started = await daemon.client.start({ command: ['printf', 'one\\ntwo'] })
    const none = await daemon.client.read(started.id, { waitMs: 60_000, waitFor: 'three' })
    expect(none).toMatchObject({ data: 'one\ntwo', done: true, state: 'exited' })
    expect(none.matched).toBeUndefined()
    const last = await daemon.client.read(started.id, { waitMs: 60_000, waitFor: 'tw' })
    expect(last).toMatchObject({ data: 'one\ntwo', matched: { line: 'two', end: 7 } })
  })

  test('a pattern RE2 cannot match is refused, naming waitFor', async () => {
    const started = await daemon.client.start({ command: ['true'] })
    const error = await daemon.client.read(started.id, { waitFor: '(a)\\1' }).catch((caught: unknown) => caught)
    expect(isTendError(error, 'TEND_ERR_VALIDATION')).toBe(true)
    expect((error as Error).message).toContain('waitFor: not a regular expression')
  })
})
