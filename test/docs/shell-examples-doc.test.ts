import { expect, test } from 'vitest'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { REPO_ROOT } from '../helpers/test-daemon.js'

/*
 * A command typed at a shell lands in its history (~/.bash_history), which outlives the session and
 * which any program of that user can read. So no shell example in the docs carries a credential on
 * its command line: a URL with a password is typed at a prompt that does not echo it, or into an
 * editor, and commands name the file that holds it.
 */

/** A URL with a password in it: `scheme://[user]:password@`. */
const URL_WITH_PASSWORD = /[a-z][a-z0-9+.-]*:\/\/[^\s'"@/]*:[^\s'"@/]+@/i

/** The lines of every shell code block of a markdown file, with their line numbers; comments left out. */
function shellLines(markdown: string): Array<{ line: number; text: string }> {
  const lines: Array<{ line: number; text: string }> = []
  let inShell = false
  let inBlock = false
  markdown.split('\n').forEach((text, index) => {
    const fence = /^\s*```\s*([a-z]*)/.exec(text)
    if (fence) {
      if (inBlock) inBlock = inShell = false
      else {
        inBlock = true
        inShell = ['sh', 'bash', 'shell', 'console', 'zsh'].includes(fence[1]!)
      }
      return
    }
    if (inShell && !/^\s*#/.test(text)) lines.push({ line: index + 1, text: text.replace(/\s+#.*$/, '') })
  })
  return lines
}

test('no shell example in the docs puts a password on a command line, where the shell would keep it in its history', () => {
  const files = [
    'README.md',
    ...readdirSync(join(REPO_ROOT, 'docs'))
      .filter((name) => name.endsWith('.md'))
      .map((name) => join('docs', name)),
  ]
  const found: string[] = []
  for (const file of files) {
    for (const { line, text } of shellLines(readFileSync(join(REPO_ROOT, file), 'utf8'))) {
      if (URL_WITH_PASSWORD.test(text) || /^\s*(export\s+)?[A-Z_]*(PASSWORD|TOKEN|SECRET)[A-Z_]*=\S/.test(text)) found.push(`${file}:${line}: ${text.trim()}`)
    }
  }
  expect(found).toEqual([])
  // The check reads the blocks at all: the cluster page's examples are among them.
  expect(shellLines(readFileSync(join(REPO_ROOT, 'docs', 'cluster.md'), 'utf8')).some(({ text }) => text.includes('tend worker'))).toBe(true)
})
