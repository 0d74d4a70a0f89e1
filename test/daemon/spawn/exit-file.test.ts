import { afterAll, describe, expect, test } from 'vitest'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseExitRecord, readExitFile } from '../../../daemon/spawn/exit-file.js'

/** The exit file's one reader (daemon/spawner/PROTOCOL.md, "Exit file"): the fixed line, and the line of the version before. */

const scratch = mkdtempSync(join(tmpdir(), 'tend-exit-file-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

let count = 0
function freshDir(): string {
  return mkdtempSync(join(scratch, `t${count++}-`))
}

/** Writes text into a new file and answers its path. */
function write(text: string): string {
  const path = join(scratch, `exit-${count++}.json`)
  writeFileSync(path, text)
  return path
}

const FIXED = (fields: Partial<Record<string, unknown>>) =>
  `${JSON.stringify({ v: 1, pid: 12, exitCode: 0, signal: null, endedAtMs: 1700000000000, endedBy: 'itself', outputLostBytes: 0, ...fields })}\n`

describe('readExitFile: the fixed line', () => {
  test('reads an exit, a signal death, what ended the task and the output it lost', () => {
    expect(readExitFile(write(FIXED({})))).toEqual({ pid: 12, exitCode: 0, signal: null, endedAt: '2023-11-14T22:13:20.000Z' })
    expect(readExitFile(write(FIXED({ exitCode: null, signal: 9 })))).toEqual({
      pid: 12,
      exitCode: null,
      signal: 'SIGKILL',
      endedAt: '2023-11-14T22:13:20.000Z',
    })
    expect(readExitFile(write(FIXED({ exitCode: null, signal: 9, endedBy: 'lifeline' })))).toMatchObject({ signal: 'SIGKILL', lifelineBroke: true })
    expect(readExitFile(write(FIXED({ exitCode: null, signal: 9, endedBy: 'lease' })))).toMatchObject({ signal: 'SIGKILL', leaseRanOut: true })
    expect(readExitFile(write(FIXED({ outputLostBytes: 4096 })))).toMatchObject({ exitCode: 0, outputLostBytes: 4096 })
  })

  test('a field missing, one more, or a value out of its range is no exit record', () => {
    for (const bad of [
      FIXED({ v: 2 }),
      FIXED({ endedBy: 'daemon' }),
      FIXED({ endedBy: undefined }),
      FIXED({ outputLostBytes: -1 }),
      FIXED({ outputLostBytes: undefined }),
      FIXED({ lifelineBroke: true }),
      FIXED({ exitCode: null, signal: null }),
      FIXED({ exitCode: 1, signal: 9 }),
      FIXED({ pid: 0 }),
    ]) {
      expect(parseExitRecord(bad), bad).toBeNull()
    }
  })
})

describe('readExitFile: a file of the version before (no "v")', () => {
  test('reads an exit and a signal death; anything else is null', () => {
    const dir = freshDir()
    expect(readExitFile(write('{"pid":12,"exitCode":0,"signal":null,"endedAtMs":1700000000000}\n'))).toEqual({
      pid: 12,
      exitCode: 0,
      signal: null,
      endedAt: '2023-11-14T22:13:20.000Z',
    })
    expect(readExitFile(write('{"pid":12,"exitCode":null,"signal":9,"endedAtMs":1700000000000}'))).toEqual({
      pid: 12,
      exitCode: null,
      signal: 'SIGKILL',
      endedAt: '2023-11-14T22:13:20.000Z',
    })
    expect(readExitFile(write('{"pid":12,"exitCode":null,"signal":40,"endedAtMs":1}'))).toMatchObject({ signal: 'SIG40' })
    for (const bad of [
      '',
      '{"pid":12,"exitCode":0,"signal":null',
      '{"pid":12,"exitCode":null,"signal":null,"endedAtMs":1}',
      '{"pid":12,"exitCode":1,"signal":9,"endedAtMs":1}',
      '{"pid":12,"exitCode":256,"signal":null,"endedAtMs":1}',
      '{"pid":12,"exitCode":null,"signal":0,"endedAtMs":1}',
      '{"pid":0,"exitCode":0,"signal":null,"endedAtMs":1}',
      '{"pid":12,"exitCode":0,"signal":null}',
      '{"pid":"12","exitCode":0,"signal":null,"endedAtMs":1}',
      '[12,0,null,1]',
      'null',
    ]) {
      expect(readExitFile(write(bad)), bad).toBeNull()
    }
    expect(readExitFile(join(dir, 'missing.json'))).toBeNull()
    expect(readExitFile(dir)).toBeNull()
  })
})

const WITH_USAGE = (fields: Partial<Record<string, unknown>>) =>
  `${JSON.stringify({
    v: 2,
    pid: 12,
    exitCode: 0,
    signal: null,
    endedAtMs: 1700000000000,
    endedBy: 'itself',
    outputLostBytes: 0,
    cpuUserMs: 1200,
    cpuSystemMs: 30,
    peakMemoryBytes: 209_715_200,
    readBytes: 4096,
    writeBytes: 10_485_760,
    ...fields,
  })}\n`

describe('readExitFile: the line with what the task used (v 2)', () => {
  test("reads the exit and the keeper's figures", () => {
    expect(readExitFile(write(WITH_USAGE({})))).toEqual({
      pid: 12,
      exitCode: 0,
      signal: null,
      endedAt: '2023-11-14T22:13:20.000Z',
      usage: { cpuUserMs: 1200, cpuSystemMs: 30, peakMemoryBytes: 209_715_200, readBytes: 4096, writeBytes: 10_485_760 },
    })
    expect(readExitFile(write(WITH_USAGE({ exitCode: null, signal: 9, endedBy: 'lease' })))).toMatchObject({ leaseRanOut: true, usage: { cpuUserMs: 1200 } })
  })

  test('a figure missing, negative or not an integer is no exit record', () => {
    for (const bad of [
      WITH_USAGE({ cpuUserMs: undefined }),
      WITH_USAGE({ cpuSystemMs: -1 }),
      WITH_USAGE({ peakMemoryBytes: 1.5 }),
      WITH_USAGE({ readBytes: '1' }),
      WITH_USAGE({ writeBytes: null }),
      WITH_USAGE({ extra: 1 }),
      WITH_USAGE({ v: 1 }),
    ]) {
      expect(parseExitRecord(bad), bad).toBeNull()
    }
  })
})
