#!/usr/bin/env node
// The composition root: `tend daemon` runs the daemon, `tend mcp` the MCP server; every other
// command is the client CLI. The CLI and the MCP server are each one bundled file (bin/bundle.mjs),
// built at `npm run build`. The daemon runs from dist/ as tsc built it: bundled, its resident
// memory still grows 7–17 MiB over 10,000 fuzzed requests (test/faults/fuzz.test.ts allows 10),
// mostly outside V8's heap, cause not yet found (docs/benchmarks.md, session 11).
// This file is CommonJS (bin/package.json): an ES module entry costs Node its ES module loader
// before anything runs, ~8 ms of every command.
'use strict'
const { enableCompileCache } = require('node:module')

// V8's code cache on disk (Node >= 22.1): later runs skip compiling the bundle. Absent before.
enableCompileCache?.()

const args = process.argv.slice(2)
const command = args.find((arg) => !arg.startsWith('-'))
const daemonFlagsOnly = args.every((arg) => arg === 'daemon' || arg === '--json')
const settle = (exitCode) => {
  process.exitCode = exitCode
}
if (command === 'daemon' && daemonFlagsOnly) {
  import('../dist/daemon/main.js')
    .then(({ runDaemonForeground }) => runDaemonForeground(process.env, (line) => process.stderr.write(`${line}\n`)))
    .then(settle)
} else if (command === 'mcp') {
  require('../dist/bundle/mcp.cjs').runMcp(args.slice(args.indexOf('mcp') + 1)).then(settle)
} else {
  require('../dist/bundle/cli.cjs').main(process.argv)
}
