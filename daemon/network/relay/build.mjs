#!/usr/bin/env node
// Compiles the egress proxy's relay addon (splice-relay.c) to dist/daemon/network/relay/splice-relay.node.
// Run after tsc by the build, prepare and test scripts. Without a C compiler or Node's headers it
// prints one warning line, and the proxy relays through Node streams instead (about half as fast).
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { compileAddon } from '../../native-build.mjs'

const here = dirname(fileURLToPath(import.meta.url))
compileAddon({
  root: join(here, '..', '..', '..'),
  target: join(here, '..', '..', '..', 'dist', 'daemon', 'network', 'relay', 'splice-relay.node'),
  source: join(here, 'splice-relay.c'),
  buildScript: fileURLToPath(import.meta.url),
  warn: (reason) => process.stderr.write(`tend: warning: the egress relay addon was not built (${reason}); the egress proxy relays through Node streams (slower)\n`),
})
