#!/usr/bin/env node
// The composition root: `tend daemon` runs the daemon, `tend mcp` the MCP server; every other
// command is the client CLI. Each is one bundled file (bin/bundle.mjs), built at `npm run build`:
// a start then reads and compiles one file instead of resolving hundreds of modules.
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
  require('../dist/bundle/daemon.cjs')
    .runDaemonForeground(process.env, (line) => process.stderr.write(`${line}\n`))
    .then(settle)
} else if (command === 'mcp') {
  require('../dist/bundle/mcp.cjs').runMcp(args.slice(args.indexOf('mcp') + 1)).then(settle)
} else {
  require('../dist/bundle/cli.cjs').main(process.argv)
}
