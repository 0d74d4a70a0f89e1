#!/usr/bin/env node
// Keeps the build out of an install of the package: `npm pack` and `npm publish` run `strip` last in
// prepack, so the package.json they pack has no `prepare` (the checkout's build, which `npm ci`
// runs), and `restore` in postpack. npm lists a `prepare` of an installed package among the
// scripts it warns about, and nothing of it is needed there: the package ships what it builds.
// The script is kept under another name (`_prepare`), so that restore needs no copy of the file.
//
//   node bin/pack-manifest.mjs strip      prepare -> _prepare in package.json
//   node bin/pack-manifest.mjs restore    _prepare -> prepare
import { readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const MANIFEST = join(dirname(fileURLToPath(import.meta.url)), '..', 'package.json')
const RENAMES = { strip: ['prepare', '_prepare'], restore: ['_prepare', 'prepare'] }

const step = process.argv[2]
if (!(step in RENAMES)) {
  process.stderr.write(`usage: node bin/pack-manifest.mjs strip|restore (got ${step ?? 'nothing'})\n`)
  process.exit(2)
}
const [from, to] = RENAMES[step]
const manifest = JSON.parse(readFileSync(MANIFEST, 'utf8'))
// Renamed in place: the keys keep their order, and the file its shape (two-space JSON, as npm writes it).
manifest.scripts = Object.fromEntries(Object.entries(manifest.scripts ?? {}).map(([name, command]) => [name === from ? to : name, command]))
writeFileSync(MANIFEST, `${JSON.stringify(manifest, null, 2)}\n`)
