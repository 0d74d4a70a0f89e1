#!/usr/bin/env node
// The composition root: `tend daemon` runs the daemon, `tend mcp` the MCP server; every other
// command is the client CLI. Each is one bundled file (bin/bundle.mjs), built at `npm run build`:
// a start then reads one file instead of resolving hundreds of modules, and the CLI's is compiled
// from V8's code cache (bin/compile-cache.js).
// This file is CommonJS (bin/package.json): an ES module entry costs Node its ES module loader
// before anything runs, ~8 ms of every command.
'use strict'
const { loadBundle } = require('./compile-cache.js')

const args = process.argv.slice(2)
const command = args.find((arg) => !arg.startsWith('-'))
const daemonFlagsOnly = args.every((arg) => arg === 'daemon' || arg === '--json')
const settle = (exitCode) => {
  process.exitCode = exitCode
}
if (command === 'daemon' && daemonFlagsOnly) {
  loadBundle('daemon')
    .runDaemonForeground(process.env, (line) => process.stderr.write(`${line}\n`))
    .then(settle)
} else if (command === 'mcp') {
  loadBundle('mcp').runMcp(args.slice(args.indexOf('mcp') + 1)).then(settle)
} else {
  loadBundle('cli').main(process.argv)
}
