#!/usr/bin/env node
// Compiles the memory-release addon (release-memory.c) to dist/daemon/memory/release-memory.node.
// Run after tsc by the build, prepare and test scripts. Without a C compiler or Node's headers it
// prints one warning line, and an idle daemon keeps the memory malloc has freed (daemon/memory/).
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { compileAddon } from '../native-build.mjs'

const here = dirname(fileURLToPath(import.meta.url))

compileAddon({
  root: join(here, '..', '..'),
  target: join(here, '..', '..', 'dist', 'daemon', 'memory', 'release-memory.node'),
  source: join(here, 'release-memory.c'),
  buildScript: fileURLToPath(import.meta.url),
  warn: (reason) => process.stderr.write(`tend: warning: the memory-release addon was not built (${reason}); an idle daemon keeps the memory malloc has freed\n`),
})
