#!/usr/bin/env node
// Compiles the durable-write addon (durable-write.c) to dist/daemon/durable-write/durable-write.node.
// Run after tsc by the build, prepare and test scripts. Without a C compiler or Node's headers it
// prints one warning line, and the daemon writes its records with Node's fs calls instead (the same
// files, a little slower: daemon/durable-write/durable-write.ts).
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { compileAddon } from '../native-build.mjs'

const here = dirname(fileURLToPath(import.meta.url))

compileAddon({
  root: join(here, '..', '..'),
  target: join(here, '..', '..', 'dist', 'daemon', 'durable-write', 'durable-write.node'),
  source: join(here, 'durable-write.c'),
  buildScript: fileURLToPath(import.meta.url),
  warn: (reason) => process.stderr.write(`tend: warning: the durable-write addon was not built (${reason}); the daemon writes task records with Node's fs calls instead\n`),
})
