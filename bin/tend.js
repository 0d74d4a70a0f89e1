#!/usr/bin/env node
// The composition root: `tend daemon` runs the daemon, `tend mcp` the MCP server; every other
// command is the client CLI. The CLI and the MCP server are each one bundled file (bin/bundle.mjs),
// built at `npm run build`. The daemon runs from dist/ as tsc built it: bundled, its resident
// memory grew 17 MiB over 10,000 fuzzed requests against 4.6 MiB unbundled (test/faults/fuzz.test.ts),
// and a daemon starts once, so the bundle's faster load buys less there.
import module from 'node:module'

// V8's code cache on disk (Node >= 22.1): later runs skip compiling the bundle. Absent before.
module.enableCompileCache?.()
const require = module.createRequire(import.meta.url)

const args = process.argv.slice(2)
const command = args.find((arg) => !arg.startsWith('-'))
const daemonFlagsOnly = args.every((arg) => arg === 'daemon' || arg === '--json')
if (command === 'daemon' && daemonFlagsOnly) {
  const { runDaemonForeground } = await import('../dist/daemon/main.js')
  process.exitCode = await runDaemonForeground(process.env, (line) => process.stderr.write(`${line}\n`))
} else if (command === 'mcp') {
  const { runMcp } = require('../dist/bundle/mcp.cjs')
  process.exitCode = await runMcp(args.slice(args.indexOf('mcp') + 1))
} else {
  const { main } = require('../dist/bundle/cli.cjs')
  await main(process.argv)
}
