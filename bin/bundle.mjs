#!/usr/bin/env node
// Bundles the three entries of bin/tend.js (the CLI, `tend mcp` and `tend daemon`) from tsc's output
// in dist/ into one file each under dist/bundle/. Run by the build after tsc: a command then
// loads one file instead of hundreds (ESM resolution and file reads were most of a CLI call).
// The bundles are CommonJS: Node's built-ins then load without an ES module facade each, which
// measured a few milliseconds less per command than the same bundle as an ES module.
import { build } from 'esbuild'
import { readFile } from 'node:fs/promises'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const DIST = join(ROOT, 'dist')
export const BUNDLE_DIR = join(DIST, 'bundle')

/** Entry (a file of dist/) per bundle name: the bundle is dist/bundle/<name>.cjs. */
export const ENTRIES = {
  cli: 'client/cli/main.js',
  mcp: 'tools/mcp/main.js',
  daemon: 'daemon/main.js',
}

/**
 * Code that finds a file from where it is (the package root, hence dist/native/'s addon and
 * executables; the precompiled schemas; package.json) keeps doing so from inside a bundle: its
 * `import.meta.url` becomes the URL of the dist/ file it was compiled to (relative to the bundle's
 * own URL, BUNDLE_URL below).
 */
const keepModuleUrls = {
  name: 'keep-module-urls',
  setup(build) {
    build.onLoad({ filter: /\.js$/ }, async (args) => {
      if (!args.path.startsWith(DIST + '/')) return undefined
      const contents = await readFile(args.path, 'utf8')
      if (!contents.includes('import.meta.url')) return undefined
      const fromBundle = relative(BUNDLE_DIR, args.path)
      return { contents: contents.replaceAll('import.meta.url', `new URL(${JSON.stringify(fromBundle)}, import.meta.url).href`), loader: 'js' }
    })
  },
}

/**
 * Libraries the daemon loads only when used (execa for the fallback spawner, @fastify/swagger for
 * /v1/openapi.json, @fastify/static for the console's page, bullmq for a cluster) stay out of its bundle and load from node_modules then: inside it, every start
 * would pay to compile ~300 KiB of them. Each must be reached through import() only, never a
 * static import: that would turn into a require, which fails for an ES module (execa) before
 * Node 20.19.
 */
const LOADED_WHEN_USED = { daemon: ['execa', '@fastify/swagger', '@fastify/static', 'bullmq', 'ioredis'], cli: ['bullmq'] }

/** Options for one bundle; `write: false` answers the bundle and its metafile without writing. */
export function bundleOptions(name, overrides = {}) {
  return {
    entryPoints: [join(DIST, ENTRIES[name])],
    outfile: join(BUNDLE_DIR, `${name}.cjs`),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20.11',
    banner: { js: "const __tendBundleUrl = require('node:url').pathToFileURL(__filename).href;" },
    define: { 'import.meta.url': '__tendBundleUrl' },
    plugins: [keepModuleUrls],
    // A third less to parse at every start; identifiers keep their names (stack traces, fastify).
    minifyWhitespace: true,
    minifySyntax: true,
    sourcemap: 'linked',
    legalComments: 'linked',
    logLevel: 'warning',
    metafile: true,
    external: LOADED_WHEN_USED[name] ?? [],
    ...overrides,
  }
}

export async function bundleAll(overrides = {}) {
  const results = {}
  for (const name of Object.keys(ENTRIES)) results[name] = await build(bundleOptions(name, overrides))
  return results
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await bundleAll()
