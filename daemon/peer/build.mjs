#!/usr/bin/env node
// Compiles the peer-credentials addon (peer-credentials.c) to dist/daemon/peer/peer-credentials.node.
// Run after tsc by the build, prepare and test scripts. Without a C compiler or Node's headers it
// prints one warning line, and the daemon starts without its check on sandboxed callers (it says
// so in its log and in `tend status`).
import { existsSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { compileC } from '../native-build.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const source = join(here, 'peer-credentials.c')

/** Where node_api.h is: beside the running node (<prefix>/include/node), else where node-gyp keeps headers. */
function nodeIncludeDir() {
  const candidates = [
    join(dirname(dirname(process.execPath)), 'include', 'node'),
    process.config.variables.node_prefix && join(process.config.variables.node_prefix, 'include', 'node'),
    join(homedir(), '.cache', 'node-gyp', process.versions.node, 'include', 'node'),
  ]
  return candidates.find((dir) => dir && existsSync(join(dir, 'node_api.h'))) ?? null
}

const include = nodeIncludeDir()
compileC({
  root: join(here, '..', '..'),
  target: join(here, '..', '..', 'dist', 'daemon', 'peer', 'peer-credentials.node'),
  sources: [source],
  inputs: [source, fileURLToPath(import.meta.url), fileURLToPath(new URL('../native-build.mjs', import.meta.url))],
  flags: ['-std=gnu11', '-O2', '-Wall', '-Wextra', '-fPIC', '-shared', '-fvisibility=hidden', `-I${include}`],
  precondition: () => (include === null ? `Node's headers (node_api.h) were not found beside ${process.execPath}; install them (e.g. the nodejs-dev or libnode-dev package)` : null),
  warn: (reason) => process.stderr.write(`tend: warning: the peer-credentials addon was not built (${reason}); the daemon will not refuse requests from sandboxed tasks\n`),
})
