import { describe, expect, test } from 'vitest'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import type { Writable } from 'node:stream'
import { waitFor } from '../../helpers/wait-for.js'
import { binary, frame, freshDir, request, SPAWN_HEADER, spawner, started, useNativeSpawner } from './native-fixture.js'

/** The native spawner's wire (daemon/spawner/PROTOCOL.md), written raw to a helper: what it takes and what it refuses. */

useNativeSpawner()

/** A helper of its own, for raw requests: what it printed so far, and its exit code once it is gone. */
function rawHelper(): { stdin: Writable; stdout: () => string; exited: Promise<number | null> } {
  const helper = spawn(binary!, [String(process.pid)], { stdio: ['pipe', 'pipe', 'pipe'] })
  let stdout = ''
  helper.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => helper.once('close', (code) => resolve(code)))
  helper.stdin.on('error', () => {}) // EPIPE if it exits before taking everything
  return { stdin: helper.stdin, stdout: () => stdout, exited }
}

describe('native spawner: the wire', () => {
  test('a malformed request makes the helper say so and exit 2', async () => {
    const helper = rawHelper()
    helper.stdin.end(frame([...SPAWN_HEADER, '/bin/true', '/tmp', '/tmp/x', 'not-a-number']))
    expect(await helper.exited).toBe(2)
    expect(helper.stdout()).toMatch(/^error openFiles is not a decimal number\n$/)
  })

  test('a blob that runs past the end of its request is malformed: the helper says so and exits 2', async () => {
    const helper = rawHelper()
    // No cwd identity, no user, argv [true], no env, extra files, cgroups, pins, views or hidden paths, one blob of 100 bytes holding 3.
    const fields = [...SPAWN_HEADER, '/bin/true', '/tmp', '/tmp/x', '64', '1000', '', '', '', '', '1', 'true', '0', '0', '0', '0', '0', '0', '1', '100']
    const framed = frame(fields)
    framed.writeUInt32LE(framed.length - 4 + 3)
    helper.stdin.end(Buffer.concat([framed, Buffer.from('abc')]))
    expect(await helper.exited).toBe(2)
    expect(helper.stdout()).toBe('error truncated request: a blob is shorter than its length\n')
  })

  test('a raw spawn request (version 2, no flags, no exit file) starts a keeper and reports the exit; a malformed attach is an error', async () => {
    const helper = rawHelper()
    // The output file is a regular file, as every output file must be (regular.c).
    helper.stdin.write(
      frame([
        ...SPAWN_HEADER.slice(0, 3),
        '7',
        ...SPAWN_HEADER.slice(4),
        '/bin/sh',
        '/',
        join(freshDir(), 'output.log'),
        '64',
        '1000000',
        '',
        '',
        '',
        '',
        '3',
        'sh',
        '-c',
        'exit 6',
        '0',
        '0',
        '0',
        '0',
        '0',
        '0',
        '0',
        '0',
        '',
        '',
        '',
      ]),
    )
    const lines = await waitFor('started and exited', () => {
      const said = helper.stdout().split('\n')
      return said.length >= 3 ? said : undefined
    })
    const [, , taskPid, keeperPid, keeperStart] = lines[0]!.split(' ')
    expect(lines[0]).toMatch(/^started 7 \d+ \d+ \d+$/)
    expect(lines[1]).toBe(`exited ${taskPid} 6 0`)
    expect(Number(keeperPid)).toBeGreaterThan(0)
    expect(Number(keeperStart)).toBeGreaterThan(0)
    helper.stdin.end(frame(['attach', '8', 'not-a-pid', '1', '2']))
    expect(await helper.exited).toBe(2)
    expect(helper.stdout().split('\n').slice(2)).toEqual(['error keeperPid is not a decimal number', ''])
  })

  test('a spawn of another version, with an unknown flag, a terminal without stdin, or of an unknown kind is malformed', async () => {
    const body = ['/bin/true', '/', '/tmp/x', '64', '1000', '', '', '', '', '1', 'true', '0', '0', '0', '0', '0', '0', '0', '0', '', '', '']
    const cases: Array<[string[], string]> = [
      [['spawn', '1', ...SPAWN_HEADER.slice(2)], 'protocol version 1 is not 2'],
      [['spawn', '2', '16', ...SPAWN_HEADER.slice(3)], 'unknown flags 16'],
      [['spawn', '2', '2', ...SPAWN_HEADER.slice(3)], 'a terminal without a stdinFifo'],
      [['spawn', '2', '0', '1', '', '/tmp/in.fifo', '', '0', '0', '0'], 'stdinFifo given without its flag'],
      [['spawn', '2', '8', ...SPAWN_HEADER.slice(3)], 'a setup report without a setupWaitMs'],
      [['spawn', '2', '0', '1', '', '', '', '0', '0', '500'], 'a setupWaitMs without a setup report'],
      [['spawn', '2', '8', '1', '', '', '', '0', '0', '3600001'], 'setupWaitMs is too large'],
      [['spawn-stdin', ...SPAWN_HEADER.slice(1)], 'unknown request kind'],
      [['1', ...body], 'unknown request kind'],
    ]
    for (const [header, message] of cases) {
      const helper = rawHelper()
      helper.stdin.end(frame([...header, ...body]))
      expect(await helper.exited, message).toBe(2)
      expect(helper.stdout()).toBe(`error ${message}\n`)
    }
  })
})
