#!/usr/bin/env node
// Compiles the native spawner (every .c file here: tend-spawner.c and its parts) to
// dist/daemon/spawner/tend-spawner. Run after tsc by the build and prepare scripts. Without a C
// compiler (or when the compile fails) it prints one warning line and the daemon starts tasks
// through child_process.
import { readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { compileC } from '../native-build.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const names = readdirSync(here)
const sources = names.filter((name) => name.endsWith('.c')).sort().map((name) => join(here, name))
const headers = names.filter((name) => name.endsWith('.h')).map((name) => join(here, name))

compileC({
  root: join(here, '..', '..'),
  target: join(here, '..', '..', 'dist', 'daemon', 'spawner', 'tend-spawner'),
  sources,
  inputs: [...sources, ...headers, fileURLToPath(import.meta.url), fileURLToPath(new URL('../native-build.mjs', import.meta.url))],
  flags: ['-std=gnu11', '-O2', '-Wall', '-Wextra'],
  mode: 0o755,
  warn: (reason) => process.stderr.write(`tend: warning: the native spawner was not built (${reason}); tasks will start through Node's child_process (slower)\n`),
})
