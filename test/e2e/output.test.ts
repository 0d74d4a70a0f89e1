import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createHash } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { FIXTURES, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

let daemon: TestDaemon

beforeAll(async () => {
  daemon = await startTestDaemon()
})
afterAll(async () => {
  await daemon.stop()
})

/** A task that prints `ready`, then one line each time a file named go-N appears in its cwd. */
function gatedTask(lines: number): string {
  return `echo ready; i=1; while [ $i -le ${lines} ]; do while [ ! -e go-$i ]; do sleep 0.01; done; echo "line $i"; i=$((i+1)); done`
}

describe('incremental reads', () => {
  test('200 MB of binary output reads back byte-exact through cursors', async () => {
    const bytes = 200 * 1024 * 1024
    const started = await daemon.client.start({ command: [process.execPath, join(FIXTURES, 'write-bytes.mjs'), String(bytes)] })
    const expected = createHash('sha256')
      .update(execFileSync(process.execPath, [join(FIXTURES, 'write-bytes.mjs'), String(bytes)], { maxBuffer: bytes + 1 }))
      .digest('hex')
    const hash = createHash('sha256')
    let from = 0
    let reads = 0
    for (;;) {
      const chunk = await daemon.client.read(started.id, { from, maxBytes: 7 * 1024 * 1024 + 13, waitMs: 5000, encoding: 'base64' })
      expect(chunk.from).toBe(from)
      const data = Buffer.from(chunk.data, 'base64')
      expect(chunk.next).toBe(from + data.length)
      hash.update(data)
      from = chunk.next
      reads += 1
      if (chunk.done) break
    }
    expect(from).toBe(bytes)
    expect(reads).toBeGreaterThan(28)
    expect(hash.digest('hex')).toBe(expected)
  })

  test('two readers keep independent cursors; reads never consume', async () => {
    const started = await daemon.client.start({ command: ['sh', '-c', 'for i in 1 2 3 4 5 6 7 8 9 10; do echo "row $i"; done'] })
    await daemon.client.wait(started.id)
    const other = daemon.newClient()
    const first = await daemon.client.read(started.id, { maxBytes: 12 })
    const second = await other.read(started.id, { maxBytes: 6 })
    expect(first).toMatchObject({ data: 'row 1\nrow 2\n', from: 0, next: 12, done: false, truncated: true })
    expect(second).toMatchObject({ data: 'row 1\n', from: 0, next: 6 })
    const rest = await other.read(started.id, { from: second.next })
    expect(rest.data.startsWith('row 2\n')).toBe(true)
    expect(rest).toMatchObject({ done: true, truncated: false, next: 61 })
    expect((await daemon.client.read(started.id)).data).toBe(`${first.data}${rest.data.slice(6)}`)
  })

  test('a long-poll returns as soon as new output arrives, and again when the task exits', async () => {
    const scratch = execFileSync('mktemp', ['-d']).toString().trim()
    const started = await daemon.client.start({ command: gatedTask(1), shell: true, cwd: scratch })
    await waitFor('the task to print ready', async () => (await daemon.client.read(started.id)).data === 'ready\n')
    // The poll waits up to a minute; it must come back because of the new line, not the limit.
    const poll = daemon.client.read(started.id, { from: 6, waitMs: 60_000 })
    const pending = Symbol('pending')
    expect(await Promise.race([poll, Promise.resolve(pending)])).toBe(pending)
    execFileSync('touch', [join(scratch, 'go-1')])
    const woken = await poll
    expect(woken.data).toBe('line 1\n')
    const end = await daemon.client.read(started.id, { from: woken.next, waitMs: 60_000 })
    expect(end).toMatchObject({ data: '', done: true, state: 'exited' })
    execFileSync('rm', ['-rf', scratch])
  })

  test('a long-poll on a task that ends without output returns at its end', async () => {
    const started = await daemon.client.start({ command: ['sleep', '0.3'] })
    const result = await daemon.client.read(started.id, { waitMs: 60_000 })
    expect(result).toMatchObject({ data: '', done: true, next: 0, state: 'exited' })
  })

  test('invalid UTF-8 and characters cut by maxBytes do not break byte cursors', async () => {
    // "é" is two bytes, "€" three; \xff is never valid UTF-8.
    const started = await daemon.client.start({ command: ['printf', 'a\\303\\251b\\342\\202\\254c\\377d'] })
    await daemon.client.wait(started.id)
    const raw = Buffer.from('a\u00e9b\u20acc\xffd', 'latin1')
    const exact = Buffer.concat([
      Buffer.from('a'),
      Buffer.from('\u00e9'),
      Buffer.from('b'),
      Buffer.from('\u20ac'),
      Buffer.from('c'),
      Buffer.from([0xff]),
      Buffer.from('d'),
    ])
    expect(raw.length).toBeGreaterThan(0)
    let from = 0
    let text = ''
    let reads = 0
    while (reads < 50) {
      const chunk = await daemon.client.read(started.id, { from, maxBytes: 2 })
      reads += 1
      expect(chunk.next).toBeGreaterThan(from)
      text += chunk.data
      from = chunk.next
      if (chunk.done) break
    }
    expect(from).toBe(exact.length)
    expect(text).toBe('a\u00e9b\u20acc\ufffdd')
    const binary = await daemon.client.read(started.id, { encoding: 'base64' })
    expect(Buffer.from(binary.data, 'base64')).toEqual(exact)
  })

  test('tail starts at the last N lines', async () => {
    const started = await daemon.client.start({ command: ['sh', '-c', 'for i in 1 2 3 4 5; do echo "n$i"; done'] })
    await daemon.client.wait(started.id)
    expect((await daemon.client.read(started.id, { tail: 2 })).data).toBe('n4\nn5\n')
    expect((await daemon.client.read(started.id, { tail: 0 })).data).toBe('')
    expect((await daemon.client.read(started.id, { tail: 99 })).data).toBe('n1\nn2\nn3\nn4\nn5\n')
  })

  test('follow yields every chunk until the task ends', async () => {
    const started = await daemon.client.start({ command: ['sh', '-c', 'for i in 1 2 3; do echo "f$i"; sleep 0.05; done'] })
    let text = ''
    for await (const chunk of daemon.client.follow(started.id)) text += chunk.data
    expect(text).toBe('f1\nf2\nf3\n')
    expect((await daemon.client.get(started.id)).state).toBe('exited')
  })
})
