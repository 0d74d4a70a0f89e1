#!/usr/bin/env node
// Compiles the peer-credentials addon (peer-credentials.c) to dist/daemon/peer/peer-credentials.node.
// Run after tsc by the build, prepare and test scripts. Without a C compiler or Node's headers it
// prints one warning line, and the daemon starts without its check on sandboxed callers (it says
// so in its log and in `tend status`).
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { compileAddon } from '../native-build.mjs'

const here = dirname(fileURLToPath(import.meta.url))
compileAddon({
  root: join(here, '..', '..'),
  target: join(here, '..', '..', 'dist', 'daemon', 'peer', 'peer-credentials.node'),
  source: join(here, 'peer-credentials.c'),
  buildScript: fileURLToPath(import.meta.url),
  warn: (reason) => process.stderr.write(`tend: warning: the peer-credentials addon was not built (${reason}); the daemon will not refuse requests from sandboxed tasks\n`),
})
