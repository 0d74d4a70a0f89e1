#!/usr/bin/env node
// The composition root: `tend daemon` runs the daemon, `tend mcp` the MCP server; every other
// command is the client CLI. Each is one bundled file (bin/bundle.mjs), built at `npm run build`.
import module from 'node:module'

// V8's code cache on disk (Node >= 22.1): later runs skip compiling the bundle. Absent before.
module.enableCompileCache?.()
const require = module.createRequire(import.meta.url)

const args = process.argv.slice(2)
const command = args.find((arg) => !arg.startsWith('-'))
const daemonFlagsOnly = args.every((arg) => arg === 'daemon' || arg === '--json')
if (command === 'daemon' && daemonFlagsOnly) {
  const { runDaemonForeground } = require('../dist/bundle/daemon.cjs')
  process.exitCode = await runDaemonForeground(process.env, (line) => process.stderr.write(`${line}\n`))
} else if (command === 'mcp') {
  const { runMcp } = require('../dist/bundle/mcp.cjs')
  process.exitCode = await runMcp(args.slice(args.indexOf('mcp') + 1))
} else {
  const { main } = require('../dist/bundle/cli.cjs')
  await main(process.argv)
}
