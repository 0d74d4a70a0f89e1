import { appendFileSync, mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Reporter, TestCase, TestModule } from 'vitest/node'

/**
 * A vitest reporter that records every test that did not run, with its reason, for
 * test/support/ci-summary.mjs (which `bash .ci/run` calls). vitest's JSON report says a test was
 * skipped but not why: the note a test gives `ctx.skip(note)` reaches only reporters.
 *
 *   SKIP_REPORT_FILE=/tmp/skips.jsonl vitest run --reporter=default --reporter=./test/support/skip-reporter.ts
 *
 * Appends one JSON line per test that did not pass or fail, to the file named by SKIP_REPORT_FILE
 * (nothing without it): {"file", "titles" (its suites' names, then its own), "reason"}. The
 * reason is the note given to `ctx.skip(note)` / `skip(condition, note)`; "todo" for test.todo;
 * "did not finish" for a test the run ended before; "not run: its file failed: <error>" for
 * the tests a failing beforeAll (or file) kept from running; else "no reason given" (test.skip,
 * test.skipIf, describe.skip, a bare ctx.skip()).
 */
export interface SkipRecord {
  file: string
  titles: string[]
  reason: string
}

export const NO_REASON = 'no reason given'

export function skipRecord(test: TestCase, module: TestModule): SkipRecord | undefined {
  const result = test.result()
  if (result.state === 'passed' || result.state === 'failed') return undefined
  const titles = [test.name]
  for (let parent = test.parent; parent.type !== 'module'; parent = parent.parent) titles.unshift(parent.name)
  let reason: string
  if (result.state === 'skipped' && result.note) reason = result.note
  else if (test.options.mode === 'todo') reason = 'todo'
  else if (result.state === 'pending') reason = 'did not finish (the run ended before it)'
  else reason = failedAncestor(test) ?? NO_REASON
  return { file: module.moduleId, titles, reason }
}

/** "not run: ... failed: <error>" when a suite or the file around the test failed (a beforeAll, an import). */
function failedAncestor(test: TestCase): string | undefined {
  if (test.options.mode !== 'run' && test.options.mode !== 'only') return undefined
  for (let parent: TestCase['parent'] = test.parent; ; parent = parent.parent) {
    const errors = parent.errors()
    if (errors.length > 0 || parent.state() === 'failed') {
      const where = parent.type === 'module' ? 'its file' : `its suite "${parent.name}"`
      const message = errors[0]?.message?.split('\n')[0]
      return `not run: ${where} failed${message ? `: ${message}` : ''}`
    }
    if (parent.type === 'module') return undefined
  }
}

export default class SkipReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const output = process.env.SKIP_REPORT_FILE
    if (!output) return
    const lines: string[] = []
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const record = skipRecord(test, module)
        if (record) lines.push(JSON.stringify(record))
      }
    }
    mkdirSync(dirname(output), { recursive: true })
    appendFileSync(output, lines.map((line) => `${line}\n`).join(''))
  }
}
