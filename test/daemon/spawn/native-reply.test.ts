import { describe, expect, test } from 'vitest'
import { parseReply } from '../../../daemon/spawn/native-reply.js'
import { encodeSpawn, WIRE } from '../../../daemon/spawn/native-request.js'
import { spawnRequest } from '../../helpers/spawn-request.js'

/** The native spawner's lines, both ways, without a helper: what a reply says, and a spawn's header. */

describe('parseReply', () => {
  test('each reply reads as what it says (PROTOCOL.md, "Replies")', () => {
    expect(parseReply('started 4 100 99 12345')).toEqual({ kind: 'started', id: 4, pid: 100, keeper: { pid: 99, startTicks: 12345 } })
    expect(parseReply('failed 4 chdir 2')).toEqual({ kind: 'failed', id: 4, stage: 'chdir', code: 'ENOENT', index: undefined })
    expect(parseReply('failed 4 extra 13 1')).toEqual({ kind: 'failed', id: 4, stage: 'extra', code: 'EACCES', index: 1 })
    expect(parseReply('failed 5 attach 3')).toEqual({ kind: 'failed-attach', id: 5, code: 'ESRCH' })
    expect(parseReply('attached 5')).toEqual({ kind: 'attached', id: 5 })
    expect(parseReply('exited 100 3 0')).toEqual({ kind: 'exited', pid: 100, exit: { exitCode: 3, signal: null } })
    expect(parseReply('exited 100 -1 9 lease lost=10')).toEqual({
      kind: 'exited',
      pid: 100,
      exit: { exitCode: null, signal: 'SIGKILL', leaseRanOut: true, outputLostBytes: 10 },
    })
    expect(parseReply('gone 100')).toEqual({ kind: 'gone', pid: 100 })
    expect(parseReply('pong ping-1')).toEqual({ kind: 'pong', id: 'ping-1' })
    expect(parseReply('error reqid must be 1 to 63 characters')).toEqual({ kind: 'error' })
    expect(parseReply('hello')).toEqual({ kind: 'unexpected' })
  })
})

describe('encodeSpawn', () => {
  /** A framed spawn's first ten fields: its header. */
  const headerOf = (framed: Buffer | string) => {
    if (typeof framed === 'string') throw new Error(framed)
    return framed.subarray(4).toString('latin1').split('\0').slice(0, 10)
  }

  test('the header names the version and the flags, and every field is there, empty when unused', () => {
    const plain = spawnRequest('/tmp', { file: '/bin/true' })
    expect(headerOf(encodeSpawn(3, plain))).toEqual(['spawn', String(WIRE.version), '0', '3', '/tmp/exit.json', '', '', '0', '0', '0'])
    expect(headerOf(encodeSpawn(3, { ...plain, stdinFifo: '/tmp/in.fifo', endsWithDaemon: true }))).toEqual([
      'spawn',
      '2',
      '5',
      '3',
      '/tmp/exit.json',
      '/tmp/in.fifo',
      '',
      '0',
      '0',
      '0',
    ])
    const tty = { ...plain, stdinFifo: '/tmp/in.fifo', terminal: { resizeFifo: '/tmp/resize.fifo', cols: 80, rows: 24 } }
    expect(headerOf(encodeSpawn(3, tty))).toEqual(['spawn', '2', '3', '3', '/tmp/exit.json', '/tmp/in.fifo', '/tmp/resize.fifo', '80', '24', '0'])
    // A setup report carries its wait: the default, or the request's.
    expect(headerOf(encodeSpawn(3, { ...plain, reportsSetup: true }))).toEqual(['spawn', '2', '8', '3', '/tmp/exit.json', '', '', '0', '0', '30000'])
    expect(headerOf(encodeSpawn(3, { ...plain, reportsSetup: true, setupWaitMs: 250 })).at(-1)).toBe('250')
  })

  test('what the wire cannot carry is said, not sent', () => {
    const plain = spawnRequest('/tmp', { file: '/bin/true' })
    expect(encodeSpawn(3, { ...plain, terminal: { resizeFifo: '/tmp/resize.fifo', cols: 80, rows: 24 } })).toBe('a terminal needs a stdinFifo (its input)')
    expect(encodeSpawn(3, { ...plain, argv: ['a\0b'] })).toMatch(/^a field contains a NUL byte/)
  })
})
