import { expect, test } from 'vitest'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { REPO_ROOT } from '../helpers/test-daemon.js'

/*
 * docs/reliability.md is a list of promises, each held by a test it names. A promise whose test is
 * gone, or a sentence that still describes how tend used to fail, misleads the operator who reads it.
 */

function markdownFiles(): string[] {
  return [
    'README.md',
    ...readdirSync(join(REPO_ROOT, 'docs'))
      .filter((name) => name.endsWith('.md'))
      .map((name) => join('docs', name)),
  ]
}

function testFiles(dir = join(REPO_ROOT, 'test')): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? testFiles(join(dir, entry.name)) : entry.name.endsWith('.test.ts') ? [relative(REPO_ROOT, join(dir, entry.name))] : [],
  )
}

test('no doc says a daemon crash stops, ends or loses its tasks: they outlive it under their keepers', () => {
  const claims: string[] = []
  for (const file of markdownFiles()) {
    // Sentences, wherever a line breaks them.
    const text = readFileSync(join(REPO_ROOT, file), 'utf8').replace(/\s+/g, ' ')
    for (const sentence of text.split(/(?<=[.:;])\s/)) {
      if (/daemon (crash|crashing|dies)[^.]*\b(still )?(stops|ends|kills|loses) (its|the|all) (running )?tasks/i.test(sentence))
        claims.push(`${file}: ${sentence.trim()}`)
    }
  }
  expect(claims).toEqual([])
})

test('every test file docs/reliability.md names exists', () => {
  const known = testFiles()
  const named = [...readFileSync(join(REPO_ROOT, 'docs', 'reliability.md'), 'utf8').matchAll(/`((?:test\/)?[\w/.-]+\.test\.ts)`/g)].map((match) => match[1]!)
  expect(named.length).toBeGreaterThan(0)
  const missing = named.filter((name) => !known.some((file) => file === name || file.endsWith(`/${name}`)))
  expect(missing).toEqual([])
})
