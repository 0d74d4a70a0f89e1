#!/usr/bin/env node
// Compiles the native spawner (every .c file here: tend-spawner.c and its parts) to
// dist/daemon/spawner/tend-spawner. Run after tsc
// by the build and prepare scripts. Never fails the install: without a C compiler (or when the
// compile fails) it prints one warning line and the daemon starts tasks through child_process.
import { spawnSync } from 'node:child_process'
import { chmodSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..')
const main = join(here, 'tend-spawner.c')
const target = join(root, 'dist', 'daemon', 'spawner', 'tend-spawner')
const compiler = process.env.CC?.trim() || 'cc'

function warn(reason) {
  process.stderr.write(`tend: warning: the native spawner was not built (${reason}); tasks will start through Node's child_process (slower)\n`)
}

function mtime(path) {
  try {
    return statSync(path).mtimeMs
  } catch {
    return null
  }
}

function build() {
  if (process.platform !== 'linux') return warn(`it needs Linux, this is ${process.platform}`)
  if (mtime(main) === null) return warn(`${relative(root, main)} is missing`)
  const names = readdirSync(here)
  const sources = names.filter((name) => name.endsWith('.c')).sort().map((name) => join(here, name))
  // Rebuilt when any source or header (or this script) is newer than the helper.
  const inputs = [...sources, ...names.filter((name) => name.endsWith('.h')).map((name) => join(here, name)), fileURLToPath(import.meta.url)]
  const sourceTime = Math.max(...inputs.map((path) => mtime(path) ?? 0))
  const targetTime = mtime(target)
  if (targetTime !== null && targetTime > sourceTime) return

  // A stale helper must not outlive a failed build (its protocol may be older than the daemon's).
  rmSync(target, { force: true })
  mkdirSync(dirname(target), { recursive: true })
  // Compiled next to the target, then renamed over it: a running helper keeps its old binary.
  const temporary = `${target}.${process.pid}.tmp`
  // CC may carry flags (CC="ccache gcc"), as make allows.
  const [program, ...compilerArgs] = compiler.split(/\s+/)
  const result = spawnSync(program, [...compilerArgs, '-std=gnu11', '-O2', '-Wall', '-Wextra', '-o', temporary, ...sources], { encoding: 'utf8' })
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
  chmodSync(temporary, 0o755)
  renameSync(temporary, target)
}

try {
  build()
} catch (error) {
  warn(error instanceof Error ? error.message : String(error))
}
process.exitCode = 0
