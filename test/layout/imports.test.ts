import { afterAll, expect, test } from 'vitest'
import { spawnSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

// The import rules (docs/architecture.md, "Layers") are biome's: noRestrictedImports per layer and
// noImportCycles with type-only imports counted (biome.json). These tests show the rules catch
// what they are for, then that the project keeps them.

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const BIOME = join(ROOT, 'node_modules', '.bin', 'biome')
const scratch = mkdtempSync(join(tmpdir(), 'tend-test-imports-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

function lint(cwd: string): { status: number | null; output: string } {
  const run = spawnSync(BIOME, ['lint', '--max-diagnostics=200', '--reporter=github'], { cwd, encoding: 'utf8' })
  return { status: run.status, output: `${run.stdout}${run.stderr}` }
}

/** A project of the given files under the repository's own biome.json. */
function project(name: string, files: Record<string, string>): string {
  const root = join(scratch, name)
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true })
    writeFileSync(join(root, path), text)
  }
  copyFileSync(join(ROOT, 'biome.json'), join(root, 'biome.json'))
  mkdirSync(join(root, 'node_modules', '@biomejs', 'biome'), { recursive: true })
  copyFileSync(
    join(ROOT, 'node_modules', '@biomejs', 'biome', 'configuration_schema.json'),
    join(root, 'node_modules', '@biomejs', 'biome', 'configuration_schema.json'),
  )
  return root
}

test('a cycle made only of type imports is refused', () => {
  const root = project('type-cycle', {
    'daemon/a.ts': "import type { B } from './b.js'\nexport interface A { b: B }\n",
    'daemon/b.ts': "import type { A } from './a.js'\nexport interface B { a: A }\n",
  })
  const { status, output } = lint(root)
  expect(status, output).not.toBe(0)
  expect(output).toContain('noImportCycles')
  expect(output).toContain('daemon/a.ts')
})

test.each([
  ['protocol', 'daemon'],
  ['spool', 'daemon'],
  ['client', 'daemon'],
  ['client', 'spool'],
  ['tools', 'daemon'],
  ['daemon', 'client'],
])('%s/ importing %s/ is refused, naming the rule', (from, to) => {
  const root = project(`${from}-${to}`, {
    [`${from}/user.ts`]: `import { used } from '../${to}/used.js'\nexport const value = used\n`,
    [`${to}/used.ts`]: 'export const used = 1\n',
  })
  const { status, output } = lint(root)
  expect(status, output).not.toBe(0)
  expect(output).toContain('noRestrictedImports')
  expect(output).toContain(`${from}/user.ts`)
})

test('imports the layers allow pass', () => {
  const root = project('allowed', {
    'protocol/word.ts': 'export const word = 1\n',
    'daemon/user.ts': "import { word } from '../protocol/word.js'\nexport const value = word\n",
    'tools/user.ts': "import { word } from '../client/word.js'\nexport const value = word\n",
    'client/word.ts': "import { word as inner } from '../protocol/word.js'\nexport const word = inner\n",
  })
  const { status, output } = lint(root)
  expect(status, output).toBe(0)
})

test('the project keeps the rules: no cycle, no import across layers', () => {
  const { status, output } = lint(ROOT)
  expect(status, output).toBe(0)
})
