import { describe, expect, test } from 'vitest'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
/** Issue 27's budgets: the registry stays a registry, and no file of a task's life grows past one concern. */
const SUPERVISOR = 'daemon/tasks/supervisor.ts'
const SUPERVISOR_MAX_LINES = 250
const TASKS = 'daemon/tasks'
const TASKS_FILE_MAX_LINES = 400

function listTypeScriptFiles(dir: string): string[] {
  const files: string[] = []
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry)
    if (statSync(path).isDirectory()) files.push(...listTypeScriptFiles(path))
    else if (entry.endsWith('.ts')) files.push(path)
  }
  return files
}

/** A file's line count as `wc -l` gives it: a last line without its newline counts too. */
function lineCount(source: string): number {
  if (source === '') return 0
  return source.split('\n').length - (source.endsWith('\n') ? 1 : 0)
}

/** The files of `counts` over `maxLines`, each as `file (N lines, budget M)`. */
function overBudget(counts: ReadonlyArray<{ file: string; lines: number }>, maxLines: number): string[] {
  return counts.filter(({ lines }) => lines > maxLines).map(({ file, lines }) => `${file} (${lines} lines, budget ${maxLines})`)
}

function countLines(file: string): { file: string; lines: number } {
  return { file: relative(ROOT, file), lines: lineCount(readFileSync(file, 'utf8')) }
}

describe('file budgets', () => {
  test('a line count is that of wc -l, with or without a final newline', () => {
    expect([lineCount(''), lineCount('a\n'), lineCount('a\nb'), lineCount('a\nb\n')]).toEqual([0, 1, 2, 2])
  })

  test('a file over its budget is named with its line count', () => {
    const counts = [
      { file: 'daemon/tasks/small.ts', lines: 12 },
      { file: 'daemon/tasks/large.ts', lines: 401 },
    ]
    expect(overBudget(counts, 400)).toEqual(['daemon/tasks/large.ts (401 lines, budget 400)'])
  })

  test(`${SUPERVISOR} is at most ${SUPERVISOR_MAX_LINES} lines`, () => {
    const found = overBudget([countLines(join(ROOT, SUPERVISOR))], SUPERVISOR_MAX_LINES)
    expect(found, `the supervisor is a registry of runs; move what is not into a file beside it:\n${found.join('\n')}`).toEqual([])
  })

  test(`no .ts file under ${TASKS}/ is over ${TASKS_FILE_MAX_LINES} lines`, () => {
    const files = listTypeScriptFiles(join(ROOT, TASKS))
    expect(files.length, `no .ts files found under ${TASKS}/`).toBeGreaterThan(0)
    const found = overBudget(files.map(countLines), TASKS_FILE_MAX_LINES)
    expect(found, `files over ${TASKS_FILE_MAX_LINES} lines (one concern per file: move a concern into a file beside it):\n${found.join('\n')}`).toEqual([])
  })
})
