import { expect, test } from 'vitest'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { REPO_ROOT } from '../helpers/test-daemon.js'

/*
 * One script does the system part for every way in: the README's first command (npm run setup),
 * `npm test` (its pretest), `.ci/run`, and a global install (`tend setup`, from the package).
 */

const manifest = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>; files: string[] }

// By its path, never `bash …`: npm's PATH has node_modules/.bin of every folder above the project
// first, and the script runs as root. Its first line names /bin/bash; git keeps it executable.
test('npm run setup installs what tend needs, and npm test first what its tests need, running the script by its path', () => {
  expect(manifest.scripts.setup).toBe('bin/system-setup.sh')
  expect(manifest.scripts.pretest).toBe('bin/system-setup.sh --tests')
  expect(readFileSync(join(REPO_ROOT, 'bin', 'system-setup.sh'), 'utf8').split('\n')[0]).toBe('#!/bin/bash -p')
  const mode = spawnSync('git', ['ls-files', '--stage', 'bin/system-setup.sh'], { cwd: REPO_ROOT, encoding: 'utf8' }).stdout
  expect(mode).toMatch(/^100755 /)
})

test('the package ships the script', () => {
  expect(manifest.files).toContain('bin/system-setup.sh')
})

test('.ci/run installs the packages through the script, and has no apt-get of its own', () => {
  const ci = readFileSync(join(REPO_ROOT, '.ci', 'run'), 'utf8')
  expect(ci).toMatch(/^bin\/system-setup\.sh --tests /m)
  expect(ci).not.toContain('bash bin/system-setup.sh')
  expect(ci).not.toContain('apt-get')
})

test("the README's quick start runs the set-up before the first task, and no longer asks for an apt-get first", () => {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8')
  const quickStart = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('\n## ', readme.indexOf('## Quick start') + 1))
  expect(quickStart).toContain('npm run setup && npm ci && npx tend run --wait -- echo hello')
  expect(quickStart).not.toContain('apt-get install bubblewrap')
})

test("the README's table of commands has tend setup", () => {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8')
  expect(readme).toMatch(/^\| `tend setup` \| .*bin\/system-setup\.sh/m)
})
