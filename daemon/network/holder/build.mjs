#!/usr/bin/env node
// Compiles the network holder (tend-netns.c) to dist/daemon/network/holder/tend-netns and its
// control addon (holder-control.c) to dist/daemon/network/holder/holder-control.node. Run after tsc
// by the build, prepare and test scripts. Without a C compiler (or Node's headers) it prints one
// warning line, and sandboxed tasks cannot have the loopback and allow networks (`tend status` says why).
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { compileAddon, compileC } from '../../native-build.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..', '..')
const out = join(root, 'dist', 'daemon', 'network', 'holder')
const warn = (what) => (reason) => process.stderr.write(`tend: warning: ${what} was not built (${reason}); sandboxed tasks cannot have the loopback and allow networks\n`)

compileC({
  root,
  target: join(out, 'tend-netns'),
  sources: [join(here, 'tend-netns.c')],
  inputs: [join(here, 'tend-netns.c'), fileURLToPath(import.meta.url), fileURLToPath(new URL('../../native-build.mjs', import.meta.url))],
  flags: ['-std=gnu11', '-O2', '-Wall', '-Wextra'],
  mode: 0o755,
  warn: warn('the network holder (tend-netns)'),
})
compileAddon({
  root,
  target: join(out, 'holder-control.node'),
  source: join(here, 'holder-control.c'),
  buildScript: fileURLToPath(import.meta.url),
  warn: warn('the network holder addon'),
})
