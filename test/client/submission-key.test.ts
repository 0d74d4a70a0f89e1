import { expect, test } from 'vitest'
import { execFile } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { newSubmissionKey } from '../../client/submission-key.js'
import { daemonPerFile } from '../helpers/daemon-per-file.js'
import { TEND_BIN } from '../helpers/test-daemon.js'

const shared = daemonPerFile('submission-key')

test('a submission key is 128 random bits as 32 hex digits, never twice the same', () => {
  const keys = Array.from({ length: 1000 }, () => newSubmissionKey())
  for (const key of keys) expect(key).toMatch(/^[0-9a-f]{32}$/)
  expect(new Set(keys).size).toBe(keys.length)
})

/** Node's built-in modules loaded by the time `node ...args` exits, and what it printed. */
async function builtinsLoaded(args: string[]): Promise<{ loaded: string[]; stdout: string }> {
  const preload = join(shared.workspace, 'loaded-modules.cjs')
  const report = join(shared.workspace, 'loaded-modules.json')
  writeFileSync(preload, `process.on('exit', () => require('fs').writeFileSync(${JSON.stringify(report)}, JSON.stringify(process.moduleLoadList)))\n`)
  const stdout = await new Promise<string>((resolve, reject) =>
    execFile(process.execPath, ['--require', preload, ...args], { env: { ...process.env, TEND_HOME: shared.daemon.home }, timeout: 30_000 }, (error, out) =>
      error ? reject(error) : resolve(out),
    ),
  )
  return { loaded: (JSON.parse(readFileSync(report, 'utf8')) as string[]).filter((name) => name.startsWith('NativeModule ')), stdout }
}

test('tend run loads neither node:crypto nor the ES module loader (each cost every run milliseconds)', async () => {
  const bare = new Set((await builtinsLoaded(['-e', '0'])).loaded)
  const run = await builtinsLoaded([TEND_BIN, 'run', '--json', '--sandbox', 'off', '--cwd', shared.workspace, '--', 'true'])
  shared.track((JSON.parse(run.stdout) as { id: string }).id)
  const added = run.loaded.filter((name) => !bare.has(name))
  expect(added).toContain('NativeModule http')
  expect(added.filter((name) => /^NativeModule (crypto|internal\/crypto\/|internal\/modules\/esm\/)/.test(name))).toEqual([])
})
