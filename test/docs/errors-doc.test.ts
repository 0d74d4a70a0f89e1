import { describe, expect, test } from 'vitest'
import { readFileSync } from 'node:fs'
import { ERROR_CATALOGUE, type ErrorCode } from '../../protocol/index.js'

const DOC_PATH = new URL('../../docs/errors.md', import.meta.url)

interface DocRow {
  line: number
  code: string
  statusCode: string
  blame: string
  retryable: string
  meaning: string
}

/** The rows of the `| code | HTTP status | blame | retryable | meaning |` table whose first cell is a backticked code. */
function readErrorTable(markdown: string): DocRow[] {
  const rows: DocRow[] = []
  markdown.split('\n').forEach((text, index) => {
    const cells = text
      .trim()
      .replace(/^\|/, '')
      .replace(/\|$/, '')
      .split('|')
      .map((cell) => cell.trim())
    const code = /^`(TEND_ERR_[A-Z0-9_]+)`$/.exec(cells[0] ?? '')?.[1]
    if (!text.trim().startsWith('|') || code === undefined) return
    rows.push({ line: index + 1, code, statusCode: cells[1] ?? '', blame: cells[2] ?? '', retryable: cells[3] ?? '', meaning: cells.slice(4).join('|') })
  })
  return rows
}

const rows = readErrorTable(readFileSync(DOC_PATH, 'utf8'))
const catalogue = Object.entries(ERROR_CATALOGUE) as Array<[ErrorCode, (typeof ERROR_CATALOGUE)[ErrorCode]]>

describe('docs/errors.md', () => {
  test('the table lists every code of the catalogue exactly once and no other code', () => {
    const documented = rows.map((row) => row.code)
    const duplicates = documented.filter((code, index) => documented.indexOf(code) !== index)
    expect(duplicates, 'codes listed more than once in docs/errors.md').toEqual([])
    const missing = catalogue.map(([code]) => code).filter((code) => !documented.includes(code))
    expect(missing, 'catalogue codes missing from docs/errors.md').toEqual([])
    const unknown = documented.filter((code) => !(code in ERROR_CATALOGUE))
    expect(unknown, 'codes in docs/errors.md that the catalogue does not have').toEqual([])
  })

  test.each(catalogue)('the row of %s matches its HTTP status, blame and retryability', (code, spec) => {
    const row = rows.find((candidate) => candidate.code === code)
    expect(row, `no row for ${code} in docs/errors.md`).toBeDefined()
    const where = `docs/errors.md line ${row!.line} (${code})`
    expect(row!.statusCode, `${where}: HTTP status`).toBe(String(spec.statusCode))
    expect(row!.blame, `${where}: blame`).toBe(spec.blame)
    expect(row!.retryable, `${where}: retryable (yes or no)`).toBe(spec.retryable ? 'yes' : 'no')
    expect(row!.meaning.length, `${where}: meaning is empty`).toBeGreaterThan(0)
  })

  test.each(catalogue)('the row of %s says it is local exactly when the catalogue does', (code, spec) => {
    const row = rows.find((candidate) => candidate.code === code)
    expect(row, `no row for ${code} in docs/errors.md`).toBeDefined()
    const isLocal = 'local' in spec && spec.local === true
    expect(row!.meaning.startsWith('*local*'), `docs/errors.md line ${row!.line} (${code}): meaning should ${isLocal ? '' : 'not '}start with *local*`).toBe(
      isLocal,
    )
  })
})
