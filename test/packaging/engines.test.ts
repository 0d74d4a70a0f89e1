import { afterAll, beforeAll, expect, test } from 'vitest'
import { execa } from 'execa'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

// `engines` names the Node lines tend is tested on (.ci/run runs this file on each of them). Here
// the packed tarball is installed as a user would (`npm install -g`), by npm running under the Node
// that runs this file, and npm's own view of the installed tree is asked (`npm query :semver`):
// no dependency may want more than the first release of a declared line.
const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const DECLARED: string = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).engines.node
const INSTALL_TIMEOUT_MS = 180_000

let folder = ''
let installOutput = ''
let installed = ''

// npm's `#!/usr/bin/env node` must find this Node, not the machine's: npm checks engines against
// the Node it runs under.
const npmEnv = { ...process.env, PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}` }

function npm(args: string[], cwd: string) {
  return execa('npm', args, { cwd, env: npmEnv, all: true, reject: false, stdin: 'ignore', timeout: INSTALL_TIMEOUT_MS })
}

/** The first release of each line in `engines` ("^20.19 || ^24" gives 20.19.0 and 24.0.0). */
function firstReleases(range: string): string[] {
  return range.split('||').map((part) => {
    const line = /^\^(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(part.trim())
    if (!line) throw new Error(`engines.node in package.json: expected lines like "^22.12 || ^24", got ${JSON.stringify(range)}`)
    return `${line[1]}.${line[2] ?? 0}.${line[3] ?? 0}`
  })
}

/** The packages installed in `folder` whose engines.node does not accept `version`, as name@version (wants). */
async function refusing(version: string, folder: string): Promise<string[]> {
  const result = await npm(['query', `:attr(engines, [node]):not(:semver(${version}, :attr(engines, [node]), satisfies))`], folder)
  expect(result.exitCode, result.all).toBe(0)
  return JSON.parse(result.stdout).map((found: { name: string; version: string; engines: { node: string } }) => {
    return `${found.name}@${found.version} (wants ${found.engines.node})`
  })
}

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), 'tend-engines-'))
  // The tarball of the built tree (npm test builds first), as `npm publish` would send it.
  const packed = await npm(['pack', '--ignore-scripts', '--pack-destination', folder, ROOT], folder)
  expect(packed.exitCode, packed.all).toBe(0)
  const tarball = readdirSync(folder).find((name) => name.endsWith('.tgz'))
  expect(tarball, `npm pack left no tarball in ${folder}`).toBeDefined()
  const prefix = join(folder, 'prefix')
  const install = await npm(['install', '--global', '--prefix', prefix, '--no-audit', '--no-fund', join(folder, tarball as string)], folder)
  installOutput = install.all ?? ''
  expect(install.exitCode, installOutput).toBe(0)
  installed = join(prefix, 'lib', 'node_modules', 'tend')
}, INSTALL_TIMEOUT_MS + 30_000)

afterAll(() => {
  if (folder) rmSync(folder, { recursive: true, force: true })
})

test(`this Node (${process.version}) is one of the lines package.json declares (${DECLARED})`, async () => {
  const result = await npm(['query', `:root:semver(${process.versions.node}, :attr(engines, [node]), satisfies)`], installed)
  expect(result.exitCode, result.all).toBe(0)
  expect(JSON.parse(result.stdout).map((found: { name: string }) => found.name)).toEqual(['tend'])
})

test(`npm install -g of the tarball on this Node (${process.version}) prints no engine warning`, () => {
  const warnings = installOutput.split('\n').filter((line) => /EBADENGINE|unsupported engine/i.test(line))
  expect(warnings).toEqual([])
})

test.each(firstReleases(DECLARED))('every installed package accepts Node %s, the first release of a declared line', async (version) => {
  expect(await refusing(version, installed)).toEqual([])
})

// The README's quick start (`npm ci`, `npm test`) installs the development tree too: vite, vitest.
test.each(firstReleases(DECLARED))('every package of the development tree accepts Node %s too', async (version) => {
  expect(await refusing(version, ROOT)).toEqual([])
})
