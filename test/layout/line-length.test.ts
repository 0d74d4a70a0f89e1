import { describe, expect, test } from 'vitest'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const LAYERS = ['protocol', 'spool', 'daemon', 'client', 'tools']
/** biome.json's lineWidth: the formatter keeps code within it, but never breaks a string or a comment. */
const MAX_COLUMNS = 160

function listTypeScriptFiles(dir: string): string[] {
  let entries: string[]
  try {
    entries = readdirSync(dir)
  } catch {
    return []
  }
  const files: string[] = []
  for (const entry of entries) {
    if (entry === 'node_modules') continue
    const path = join(dir, entry)
    if (statSync(path).isDirectory()) files.push(...listTypeScriptFiles(path))
    else if (entry.endsWith('.ts')) files.push(path)
  }
  return files
}

/** The lines of `source` longer than MAX_COLUMNS characters, as `file:line (length)`. */
function longLines(file: string, source: string): string[] {
  return source.split('\n').flatMap((line, index) => {
    const length = [...line].length
    return length > MAX_COLUMNS ? [`${file}:${index + 1} (${length} characters)`] : []
  })
}

describe('line length', () => {
  test('a line over the limit is reported with its file, line number and length', () => {
    const source = ['const short = 1', `const long = '${'x'.repeat(MAX_COLUMNS)}'`, `// ${'y'.repeat(MAX_COLUMNS - 3)}`].join('\n')
    expect(longLines('daemon/example.ts', source)).toEqual([`daemon/example.ts:2 (${MAX_COLUMNS + 15} characters)`])
  })

  test(`no line of protocol/ spool/ daemon/ client/ tools/ is over ${MAX_COLUMNS} characters`, () => {
    const files = LAYERS.flatMap((layer) => listTypeScriptFiles(join(ROOT, layer)))
    expect(files.length, 'no .ts files found under protocol/ spool/ daemon/ client/ tools/').toBeGreaterThan(0)
    const found = files.flatMap((file) => longLines(relative(ROOT, file), readFileSync(file, 'utf8')))
    expect(found, `lines over ${MAX_COLUMNS} characters (split the string into a concatenation, or wrap the comment):\n${found.join('\n')}`).toEqual([])
  })
})
