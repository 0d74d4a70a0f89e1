import { describe, expect, test } from 'vitest'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** Which top-level folders each layer may import from (its own folder included). */
const ALLOWED: Record<string, readonly string[]> = {
  protocol: ['protocol'],
  spool: ['protocol', 'spool'],
  daemon: ['protocol', 'spool', 'daemon'],
  client: ['protocol', 'client'],
  tools: ['protocol', 'client', 'tools'],
}
const LAYERS = Object.keys(ALLOWED)

const STATIC_IMPORT = /^\s*(?:import|export)\s[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/gm
const BARE_IMPORT = /^\s*import\s*['"]([^'"]+)['"]/gm
const DYNAMIC_IMPORT = /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g

/** Every module specifier a source file imports or re-exports, static or dynamic. */
function importSpecifiers(source: string): string[] {
  const found: string[] = []
  for (const pattern of [STATIC_IMPORT, BARE_IMPORT, DYNAMIC_IMPORT]) {
    for (const match of source.matchAll(pattern)) found.push(match[1]!)
  }
  return found
}

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

interface Violation {
  file: string
  specifier: string
  target: string
}

/** The imports of `file` (a path under ROOT) that leave the folders its layer may use. */
function violationsOf(file: string, source: string): Violation[] {
  const layer = relative(ROOT, file).split(sep)[0]!
  const allowed = ALLOWED[layer] ?? []
  const violations: Violation[] = []
  for (const specifier of importSpecifiers(source)) {
    // Package imports (fastify, node:fs, ...) are not layers.
    if (!specifier.startsWith('.') && !specifier.startsWith('/')) continue
    const target = relative(ROOT, resolve(dirname(file), specifier))
    const targetFolder = target.startsWith('..') ? '(outside the package)' : target.split(sep)[0]!
    if (!allowed.includes(targetFolder)) violations.push({ file: relative(ROOT, file), specifier, target: targetFolder })
  }
  return violations
}

describe('layer imports', () => {
  test('the import scanner finds static, re-exported, multi-line, side-effect and dynamic imports', () => {
    const source = [
      "import { a } from '../spool/index.js'",
      "import type { B } from '../protocol/index.js'",
      'import {',
      '  c,',
      '  d,',
      "} from '../daemon/tasks/supervisor.js'",
      "export * from './local.js'",
      "import '../client/side-effect.js'",
      "const late = await import('../tools/late.js')",
      " * a comment that says import x from '../nowhere.js' is not an import",
    ].join('\n')
    expect(importSpecifiers(source).sort()).toEqual(
      ['../spool/index.js', '../protocol/index.js', '../daemon/tasks/supervisor.js', './local.js', '../client/side-effect.js', '../tools/late.js'].sort(),
    )
  })

  test('a daemon import in the client is reported with its file and specifier', () => {
    const file = join(ROOT, 'client', 'example.ts')
    expect(violationsOf(file, "import { startDaemon } from '../daemon/index.js'")).toEqual([
      { file: join('client', 'example.ts'), specifier: '../daemon/index.js', target: 'daemon' },
    ])
  })

  test('the layers import only the layers beneath them', () => {
    const files = LAYERS.flatMap((layer) => listTypeScriptFiles(join(ROOT, layer)))
    expect(files.length, 'no .ts files found under protocol/ spool/ daemon/ client/ tools/').toBeGreaterThan(0)
    const violations = files.flatMap((file) => violationsOf(file, readFileSync(file, 'utf8')))
    const report = violations.map(({ file, specifier, target }) => `${file} imports ${specifier} (${target} is not allowed there)`).join('\n')
    expect(violations, `imports pointing the wrong way:\n${report}`).toEqual([])
  })
})
