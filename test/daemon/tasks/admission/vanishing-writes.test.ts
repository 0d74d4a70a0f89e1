import { afterAll, describe, expect, test } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { vanishingWriteWarnings } from '../../../../daemon/tasks/admission/vanishing-writes.js'
import { TASK_WARNINGS_MAX } from '../../../../protocol/index.js'

const base = mkdtempSync(join(tmpdir(), 'tend-vanishing-'))
afterAll(() => rmSync(base, { recursive: true, force: true }))

const shell = (line: string) => ['sh', '-c', line]
const submitted = (command: string[], extra: { writablePaths?: string[]; writable?: string[] } = {}) => ({
  sandbox: 'workspace' as const,
  command,
  writablePaths: extra.writablePaths ?? [],
  writable: extra.writable ?? ['/work/app'],
})

describe('writes a sandboxed task would lose without a word', () => {
  test('a writable path that does not exist is named; one that exists is not', () => {
    const missing = join(base, 'missing')
    expect(vanishingWriteWarnings(submitted(['true'], { writablePaths: [base, missing] }))).toEqual([
      `writable path ${missing} does not exist: it was skipped, so the task cannot write there (make it first)`,
    ])
  })

  test('paths under /tmp its command names, as argv words or in a shell line, in one warning', () => {
    const [warning, ...rest] = vanishingWriteWarnings(submitted(shell('make >/tmp/build.log && cp out "/tmp/out" --to=/tmp/x')))
    expect(rest).toEqual([])
    expect(warning).toMatch(/^the command names \/tmp\/build\.log, \/tmp\/out, \/tmp\/x: writes under \/tmp stay in the task's private \/tmp/)
    expect(vanishingWriteWarnings(submitted(['cp', 'a', '/tmp/b']))).toHaveLength(1)
  })

  test('no warning: a path that only contains /tmp/, one inside a writable folder under /tmp, or sandbox off', () => {
    expect(vanishingWriteWarnings(submitted(shell('echo > /var/tmp/x; echo > ./tmp/y')))).toEqual([])
    expect(vanishingWriteWarnings(submitted(shell('echo > /tmp/proj/x'), { writable: ['/tmp/proj'] }))).toEqual([])
    expect(vanishingWriteWarnings({ ...submitted(shell('echo > /tmp/x'), { writablePaths: [join(base, 'missing')] }), sandbox: 'off' })).toEqual([])
  })

  test('at most TASK_WARNINGS_MAX warnings are kept', () => {
    const missing = Array.from({ length: 20 }, (_, index) => join(base, `missing-${index}`))
    expect(vanishingWriteWarnings(submitted(['true'], { writablePaths: missing }))).toHaveLength(TASK_WARNINGS_MAX)
  })
})
