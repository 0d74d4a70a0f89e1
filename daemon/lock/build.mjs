#!/usr/bin/env node
// Compiles the instance-lock addon (instance-flock.c) to dist/daemon/lock/instance-flock.node.
// Run after tsc by the build, prepare and test scripts. Without a C compiler or Node's headers it
// prints one warning line, and the daemon takes its lock through util-linux's flock(1) instead.
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { compileAddon } from '../native-build.mjs'

const here = dirname(fileURLToPath(import.meta.url))

compileAddon({
  root: join(here, '..', '..'),
  target: join(here, '..', '..', 'dist', 'daemon', 'lock', 'instance-flock.node'),
  source: join(here, 'instance-flock.c'),
  buildScript: fileURLToPath(import.meta.url),
  warn: (reason) => process.stderr.write(`tend: warning: the instance-lock addon was not built (${reason}); the daemon takes its lock through flock(1)\n`),
})
