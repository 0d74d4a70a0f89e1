// The last words of `bash .ci/run`: names every test that failed (with the first line of its
// failure) and every test that did not run (with its reason), then one line "N passed, N failed,
// N skipped" over all the suites. A reader of a failed run may see only these last lines.
//
//   node test/support/ci-summary.mjs JSON_REPORT[:SKIP_RECORDS] ...
//
// JSON_REPORT is vitest's JSON report (the counts, and which tests were skipped); SKIP_RECORDS,
// when given, is what test/support/skip-reporter.ts wrote during the same run (why). A skipped
// test of a suite run without the skip reporter (integration/dsh/run.sh today) is listed with
// "no reason recorded". A report that cannot be read or that counts no tests, and each file that
// failed outside any test (an import error, a failing beforeAll), count as one failure.
import { readFileSync } from 'node:fs'
import { relative } from 'node:path'

const NO_REASON = 'no reason given'
const NOT_RECORDED = 'no reason recorded: this suite runs without test/support/skip-reporter.ts'
const RAN = new Set(['passed', 'failed'])
let passed = 0
let failed = 0
let skipped = 0
const lines = []
const failures = []

for (const argument of process.argv.slice(2)) {
  const [reportPath, recordsPath] = splitArgument(argument)
  let report
  try {
    report = JSON.parse(readFileSync(reportPath, 'utf8'))
  } catch (error) {
    failed += 1
    console.log(`could not read the test report ${reportPath}: ${error.message}`)
    continue
  }
  passed += report.numPassedTests ?? 0
  failed += (report.numFailedTests ?? 0) + (report.numRuntimeErrorTests ?? 0)
  skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0)
  if (!report.numTotalTests) failed += 1

  const reasons = readRecords(recordsPath) // null: no reasons were recorded
  for (const file of report.testResults ?? []) {
    const tests = file.assertionResults ?? []
    const where = relative(process.cwd(), file.name)
    if (file.status === 'failed' && !tests.some((test) => test.status === 'failed')) {
      failed += 1
      failures.push(`failed: ${where} (${firstLine(file.message) || 'failed outside any test'})`)
    }
    for (const test of tests) {
      const titles = [...(test.ancestorTitles ?? []), test.title]
      if (test.status === 'failed') {
        failures.push(`failed: ${[where, ...titles].join(' > ')} (${firstLine(test.failureMessages?.[0]) || 'no message'})`)
      }
      if (RAN.has(test.status)) continue
      const queue = reasons?.get(key(file.name, titles))
      const reason =
        queue?.shift() ??
        (test.status === 'todo' ? 'todo'
          : test.status === 'pending' ? 'did not finish'
          : file.status === 'failed' && file.message ? `skipped in a file that failed: ${file.message.split('\n')[0]}`
          : reasons ? NO_REASON
          : NOT_RECORDED)
      lines.push(`skipped: ${where} > ${titles.join(' > ')} (reason: ${reason})`)
    }
  }
}

for (const line of [...lines, ...failures]) console.log(line)
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`)

function firstLine(text) {
  return String(text ?? '').split('\n')[0].trim().slice(0, 300)
}

function splitArgument(argument) {
  // Paths are absolute temp files; the records path follows the last ':'.
  const colon = argument.lastIndexOf(':')
  return colon > 0 ? [argument.slice(0, colon), argument.slice(colon + 1)] : [argument, '']
}

/** Reasons by file and titles, in report order (two tests may share a name); null without records. */
function readRecords(path) {
  if (!path) return null
  let text = ''
  try {
    text = readFileSync(path, 'utf8')
  } catch {
    return null
  }
  const reasons = new Map()
  for (const line of text.split('\n')) {
    if (!line.trim()) continue
    try {
      const record = JSON.parse(line)
      const id = key(record.file, record.titles)
      if (!reasons.has(id)) reasons.set(id, [])
      reasons.get(id).push(record.reason || NO_REASON)
    } catch {
      // a torn line: its test is listed without a reason
    }
  }
  return reasons
}

function key(file, titles) {
  return JSON.stringify([file, titles])
}
