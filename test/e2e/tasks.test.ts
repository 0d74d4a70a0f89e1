import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { FIXTURES, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'

let daemon: TestDaemon

beforeEach(async () => {
  daemon = await startTestDaemon()
})
afterEach(async () => {
  await daemon.stop()
})

describe('tasks', () => {
  test('an argv task runs, exits 0 and its output is in output.log', async () => {
    const started = await daemon.client.start({ command: ['echo', 'hello', 'world'] })
    expect(started.id).toMatch(/^[0-9a-z]{12}$/)
    const task = await daemon.client.wait(started.id)
    expect(task).toMatchObject({ state: 'exited', exitCode: 0, signal: null, reason: null, outputBytes: 12 })
    expect(readFileSync(join(task.spool, 'output.log'), 'utf8')).toBe('hello world\n')
  })

  test('a shell line runs with sh -c and a non-zero exit is exited, not an error', async () => {
    const started = await daemon.client.start({ command: 'echo one; exit 7', shell: true })
    const task = await daemon.client.wait(started.id)
    expect(task).toMatchObject({ state: 'exited', exitCode: 7, shell: true, command: ['sh', '-c', 'echo one; exit 7'] })
  })

  test('stdout and stderr are interleaved in output.log exactly as written', async () => {
    const started = await daemon.client.start({ command: ['sh', join(FIXTURES, 'interleave.sh'), '50'] })
    await daemon.client.wait(started.id)
    const expected = Array.from({ length: 50 }, (_, index) => `out ${index + 1}\nerr ${index + 1}\n`).join('')
    expect((await daemon.client.read(started.id)).data).toBe(expected)
  })

  test('cwd, env additions and the name reach the task; stdin is /dev/null', async () => {
    const started = await daemon.client.start({
      command: 'pwd; echo "$GREETING"; cat; echo "stdin ended"',
      shell: true,
      cwd: FIXTURES,
      env: { GREETING: 'hi there' },
      name: 'context check',
    })
    const task = await daemon.client.wait(started.id)
    expect(task).toMatchObject({ state: 'exited', exitCode: 0, name: 'context check', envKeys: ['GREETING'], cwd: FIXTURES })
    expect((await daemon.client.read(started.id)).data).toBe(`${FIXTURES}\nhi there\nstdin ended\n`)
    expect(readFileSync(join(task.spool, 'task.json'), 'utf8')).not.toContain('hi there')
  })

  test('a program that does not exist gives failed with the reason', async () => {
    const started = await daemon.client.start({ command: ['tend-no-such-program-xyz'] })
    const task = await daemon.client.wait(started.id)
    expect(task).toMatchObject({ state: 'failed', startedAt: null, pid: null, exitCode: null })
    expect(task.reason).toBe('no such program: tend-no-such-program-xyz')
  })

  test('a cwd that does not exist gives failed with the reason', async () => {
    const started = await daemon.client.start({ command: ['true'], cwd: '/nonexistent/tend-test' })
    const task = await daemon.client.wait(started.id)
    expect(task).toMatchObject({ state: 'failed', reason: 'cwd does not exist: /nonexistent/tend-test' })
  })

  test('task.json is whole JSON with a schemaVersion and the task fields', async () => {
    const started = await daemon.client.start({ command: ['true'], name: 'record' })
    const task = await daemon.client.wait(started.id)
    const record = JSON.parse(readFileSync(join(task.spool, 'task.json'), 'utf8'))
    expect(record).toEqual({ schemaVersion: 1, ...task })
  })

  test('a state the API answers is already on disk: every reply of get and list matches task.json or is older', async () => {
    // The next daemon believes task.json: a reply ahead of it would be undone by a crash.
    const order = ['queued', 'running', 'exited', 'killed']
    const onDisk = (spool: string) => JSON.parse(readFileSync(join(spool, 'task.json'), 'utf8')) as { state: string; pid: number | null }
    const behind: string[] = []
    for (let round = 0; round < 40; round++) {
      const started = await daemon.client.start({ command: ['sleep', '1000'], sandbox: 'off' })
      for (;;) {
        const task = await daemon.client.get(started.id)
        const record = onDisk(task.spool)
        if (order.indexOf(task.state) > order.indexOf(record.state)) behind.push(`${task.id}: answered ${task.state}, on disk ${record.state}`)
        const listed = (await daemon.client.list()).find((each) => each.id === started.id)!
        const listedRecord = onDisk(task.spool)
        if (order.indexOf(listed.state) > order.indexOf(listedRecord.state)) behind.push(`${task.id}: listed ${listed.state}, on disk ${listedRecord.state}`)
        if (task.state === 'running' && listed.state === 'running') break
      }
      const killed = await daemon.client.kill(started.id, { signal: 'KILL' })
      expect(onDisk(killed.spool).state).toBe(killed.state)
    }
    expect(behind).toEqual([])
  })
})
