import { describe, expect, test } from 'vitest'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Metafile } from 'esbuild'
// @ts-expect-error: a build script (plain JavaScript, no declarations)
import { bundleOptions } from '../../bin/bundle.mjs'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** The daemon's libraries (schemas, validation, HTTP server, logging): a client never needs them. */
const DAEMON_ONLY_PACKAGES = ['typebox', 'ajv', 'fastify', '@fastify/', 'pino']

/**
 * Every module the given entry of dist/ reaches, statically or through import(), as esbuild
 * resolves them for the bundle (nothing is written). Annotations are ignored so that a package
 * marked free of side effects stays in the graph: unbundled, Node loads it all the same.
 */
async function moduleGraph(entry: string): Promise<Metafile> {
  const { build } = await import('esbuild')
  const options = bundleOptions('cli', { entryPoints: [join(ROOT, 'dist', entry)], write: false, ignoreAnnotations: true, logLevel: 'silent' })
  return (await build(options)).metafile as Metafile
}

const packageOf = (path: string) => /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path)?.[1]
const isDaemonOnly = (name: string) => DAEMON_ONLY_PACKAGES.some((banned) => (banned.endsWith('/') ? name.startsWith(banned) : name === banned))

/** Packages in the graph that are daemon-only, each with the modules of tend that import it. */
function daemonOnlyPackages(metafile: Metafile): Record<string, string[]> {
  const found: Record<string, string[]> = {}
  for (const [path, input] of Object.entries(metafile.inputs)) {
    for (const { path: imported } of input.imports) {
      const name = packageOf(imported)
      if (name === undefined || !isDaemonOnly(name) || packageOf(path) !== undefined) continue
      ;(found[name] ??= []).push(path)
    }
    const name = packageOf(path)
    if (name !== undefined && isDaemonOnly(name)) found[name] ??= []
  }
  return found
}

describe('what the client side loads', () => {
  test('the scanner finds a daemon-only package and the tend module that imports it', async () => {
    const graph = await moduleGraph('daemon/http/server.js')
    const found = daemonOnlyPackages(graph)
    expect(found.fastify).toEqual(expect.arrayContaining([expect.stringMatching(/dist\/daemon\/http\/server\.js$/)]))
    expect(Object.keys(found)).toEqual(expect.arrayContaining(['typebox', 'ajv']))
  })

  test.each(['client/cli/main.js', 'client/index.js'])('%s reaches no schema, validation, server or logging library', async (entry) => {
    expect(daemonOnlyPackages(await moduleGraph(entry))).toEqual({})
  })

  test('the MCP server reaches none either, except ajv: the MCP SDK imports it, and the tools check their arguments with it', async () => {
    const found = daemonOnlyPackages(await moduleGraph('tools/mcp/main.js'))
    const { ajv, ...others } = found
    expect(others).toEqual({})
    // ajv is tend's one validator; on this side only the tool-argument checks import it (the SDK's
    // own modules are not listed as importers).
    expect((ajv ?? []).map((importer) => importer.replace(/^.*?dist\//, 'dist/'))).toEqual(['dist/tools/harness/schema-dsl.js'])
  })
})
