import { describe, expect, test } from 'vitest'
import { join } from 'node:path'
import { vanishingWriteWarnings } from '../../../../daemon/tasks/admission/vanishing-writes.js'
import { TASK_WARNINGS_MAX } from '../../../../protocol/index.js'

// Admission found these missing (TaskPaths.skipped): whether a path exists is path-policy's to say.
const base = '/work/app/not-made'

const shell = (line: string) => ['sh', '-c', line]
const submitted = (command: string[], extra: { skipped?: string[]; writable?: string[] } = {}) => ({
  sandbox: 'workspace' as const,
  command,
  skipped: extra.skipped ?? [],
  writable: extra.writable ?? ['/work/app'],
})

describe('writes a sandboxed task would lose without a word', () => {
  test('a writable path admission skipped (it does not exist) is named', () => {
    const missing = join(base, 'missing')
    expect(vanishingWriteWarnings(submitted(['true'], { skipped: [missing] }))).toEqual([
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
    expect(vanishingWriteWarnings({ ...submitted(shell('echo > /tmp/x'), { skipped: [join(base, 'missing')] }), sandbox: 'off' })).toEqual([])
  })

  test('at most TASK_WARNINGS_MAX warnings are kept', () => {
    const missing = Array.from({ length: 20 }, (_, index) => join(base, `missing-${index}`))
    expect(vanishingWriteWarnings(submitted(['true'], { skipped: missing }))).toHaveLength(TASK_WARNINGS_MAX)
  })
})
