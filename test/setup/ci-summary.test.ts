// The last lines of `bash .ci/run` are all a reader of a failed run may see: every failing test
// must be named there, next to the skipped ones, before the count.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'

const script = join(import.meta.dirname, '../support/ci-summary.mjs')
let folder = ''
afterEach(() => {
  if (folder) rmSync(folder, { recursive: true, force: true })
  folder = ''
})

function summarise(...reports: object[]): string[] {
  folder = mkdtempSync(join(tmpdir(), 'tend-ci-summary-'))
  const paths = reports.map((report, index) => {
    const path = join(folder, `report-${index}.json`)
    writeFileSync(path, JSON.stringify(report))
    return path
  })
  return execFileSync(process.execPath, [script, ...paths], { encoding: 'utf8' })
    .trimEnd()
    .split('\n')
}

test('a failing test is named with its file, titles and the first line of its failure, before the count', () => {
  const lines = summarise({
    numTotalTests: 3,
    numPassedTests: 1,
    numFailedTests: 1,
    numPendingTests: 1,
    testResults: [
      {
        name: join(process.cwd(), 'test/e2e/kill.test.ts'),
        status: 'failed',
        assertionResults: [
          { status: 'passed', title: 'fine', ancestorTitles: [] },
          {
            status: 'failed',
            title: 'kills the tree',
            ancestorTitles: ['kill'],
            failureMessages: ['AssertionError: expected 1 to be 0\n    at somewhere'],
          },
          { status: 'skipped', title: 'later', ancestorTitles: [] },
        ],
      },
    ],
  })
  expect(lines.at(-1)).toBe('1 passed, 1 failed, 1 skipped')
  expect(lines).toContain('failed: test/e2e/kill.test.ts > kill > kills the tree (AssertionError: expected 1 to be 0)')
})

test('a file that failed outside any test is named with its message', () => {
  const lines = summarise({
    numTotalTests: 1,
    numPassedTests: 1,
    numFailedTests: 0,
    testResults: [
      { name: join(process.cwd(), 'test/a.test.ts'), status: 'passed', assertionResults: [{ status: 'passed', title: 'x' }] },
      { name: join(process.cwd(), 'test/b.test.ts'), status: 'failed', message: 'Error: no such module\nstack', assertionResults: [] },
    ],
  })
  expect(lines.at(-1)).toBe('1 passed, 1 failed, 0 skipped')
  expect(lines).toContain('failed: test/b.test.ts (Error: no such module)')
})
