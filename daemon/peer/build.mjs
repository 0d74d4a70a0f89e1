#!/usr/bin/env node
// Compiles the peer-credentials addon (peer-credentials.c) to dist/daemon/peer/peer-credentials.node.
// Run after tsc by the build, prepare and test scripts. Never fails the install: without a C
// compiler or Node's headers it prints one warning line, and the daemon starts without its check
// on sandboxed callers (it says so in its log and in `tend status`).
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')
const source = join(here, 'peer-credentials.c')
const target = join(root, 'dist', 'daemon', 'peer', 'peer-credentials.node')
const compiler = process.env.CC?.trim() || 'cc'

function warn(reason) {
  process.stderr.write(`tend: warning: the peer-credentials addon was not built (${reason}); the daemon will not refuse requests from sandboxed tasks\n`)
}

function mtime(path) {
  try {
    return statSync(path).mtimeMs
  } catch {
    return null
  }
}

/** Where node_api.h is: beside the running node (<prefix>/include/node), else where node-gyp keeps headers. */
function nodeIncludeDir() {
  const candidates = [
    join(dirname(dirname(process.execPath)), 'include', 'node'),
    process.config.variables.node_prefix && join(process.config.variables.node_prefix, 'include', 'node'),
    join(homedir(), '.cache', 'node-gyp', process.versions.node, 'include', 'node'),
  ]
  return candidates.find((dir) => dir && existsSync(join(dir, 'node_api.h'))) ?? null
}

function build() {
  if (process.platform !== 'linux') return warn(`it needs Linux, this is ${process.platform}`)
  const sourceTime = mtime(source)
  if (sourceTime === null) return warn(`${relative(root, source)} is missing`)
  const targetTime = mtime(target)
  if (targetTime !== null && targetTime > sourceTime) return
  const include = nodeIncludeDir()
  if (include === null) return warn(`Node's headers (node_api.h) were not found beside ${process.execPath}; install them (e.g. the nodejs-dev or libnode-dev package)`)

  rmSync(target, { force: true })
  mkdirSync(dirname(target), { recursive: true })
  // Compiled next to the target, then renamed over it: a running daemon keeps the file it loaded.
  const temporary = `${target}.${process.pid}.tmp`
  const [program, ...compilerArgs] = compiler.split(/\s+/)
  const flags = ['-std=gnu11', '-O2', '-Wall', '-Wextra', '-fPIC', '-shared', '-fvisibility=hidden', `-I${include}`]
  const result = spawnSync(program, [...compilerArgs, ...flags, '-o', temporary, source], { encoding: 'utf8' })
  if (result.error) {
    rmSync(temporary, { force: true })
    const code = /** @type {NodeJS.ErrnoException} */ (result.error).code
    return warn(code === 'ENOENT' ? `no C compiler: ${program} not found; set CC to use another` : `${program} could not run: ${result.error.message}`)
  }
  if (result.status !== 0) {
    rmSync(temporary, { force: true })
    const firstError = (result.stderr ?? '').split('\n').find((line) => /error/i.test(line)) ?? (result.stderr ?? '').split('\n')[0] ?? ''
    const how = result.signal ? `was killed by ${result.signal}` : `exited ${result.status}`
    return warn(`${program} ${how}${firstError ? `: ${firstError.trim()}` : ''}`)
  }
  renameSync(temporary, target)
}

try {
  build()
} catch (error) {
  warn(error instanceof Error ? error.message : String(error))
}
process.exitCode = 0
