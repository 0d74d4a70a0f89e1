import { expect, test } from 'vitest'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { REPO_ROOT } from '../helpers/test-daemon.js'

/*
 * One script does the system part for every way in: the README's first command (npm run setup),
 * `npm test` (its pretest), `.ci/run`, and a global install (`tend setup`, from the package).
 */

const manifest = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>; files: string[] }

test('npm run setup installs what tend needs, and npm test first what its tests need', () => {
  expect(manifest.scripts.setup).toBe('bash bin/system-setup.sh')
  expect(manifest.scripts.pretest).toBe('bash bin/system-setup.sh --tests')
})

test('the package ships the script', () => {
  expect(manifest.files).toContain('bin/system-setup.sh')
})

test('.ci/run installs the packages through the script, and has no apt-get of its own', () => {
  const ci = readFileSync(join(REPO_ROOT, '.ci', 'run'), 'utf8')
  expect(ci).toContain('bin/system-setup.sh --tests')
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
