#!/usr/bin/env node
// The composition root: `tend daemon` runs the daemon (`tend worker` one on a cluster's queue), `tend mcp` the MCP server; every other
// command is the client CLI. Each is one bundled file (bin/bundle.mjs), built at `npm run build`:
// a start then reads and compiles one file instead of resolving hundreds of modules.
// This file is CommonJS (bin/package.json): an ES module entry costs Node its ES module loader
// before anything runs, ~8 ms of every command.
'use strict'
const { enableCompileCache } = require('node:module')

// V8's code cache on disk (Node >= 22.1; absent before): later runs skip compiling the bundle.
if (enableCompileCache) {
  const cacheDir = privateCompileCacheDir()
  if (cacheDir) enableCompileCache(cacheDir)
}

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
} else if (command === 'worker' && !args.includes('--help') && !args.includes('-h')) {
  require('../dist/bundle/daemon.cjs')
    .runWorkerForeground(args.slice(args.indexOf('worker') + 1), process.env, (line) => process.stderr.write(`${line}\n`))
    .then(settle)
} else if (command === 'mcp') {
  require('../dist/bundle/mcp.cjs').runMcp(args.slice(args.indexOf('mcp') + 1)).then(settle)
} else {
  require('../dist/bundle/cli.cjs').main(process.argv)
}

/**
 * $XDG_CACHE_HOME/tend/compile-cache (else ~/.cache/...), made 0700, or null unless this user owns
 * it and its parent and no one else may write them. Node's default is a folder in the shared
 * temporary directory, which any local user (a task running as another user, sandbox off) can
 * create first: the compiled code Node would then read back there is theirs to replace, and runs
 * as whoever runs tend.
 */
function privateCompileCacheDir() {
  const { lstatSync, mkdirSync } = require('node:fs')
  const { homedir } = require('node:os')
  const { isAbsolute, join } = require('node:path')
  const cacheHome = process.env.XDG_CACHE_HOME && isAbsolute(process.env.XDG_CACHE_HOME) ? process.env.XDG_CACHE_HOME : join(homedir(), '.cache')
  const dir = join(cacheHome, 'tend', 'compile-cache')
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const ownAndClosed = (path) => {
      const stat = lstatSync(path)
      return stat.isDirectory() && stat.uid === process.getuid() && (stat.mode & 0o022) === 0
    }
    // The parent too: whoever may write it could swap the cache folder for their own.
    return ownAndClosed(dir) && ownAndClosed(join(dir, '..')) ? dir : null
  } catch {
    return null
  }
}
