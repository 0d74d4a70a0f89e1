// How daemon/native/build.mjs runs the C compiler: CC (or cc) with the given flags, its outcome a
// reason (a string naming what is missing or the compiler's first error) instead of a throw, and
// each output written next to its target, then renamed over it (a running daemon keeps the file it
// loaded).
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, rmSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'

/** Where node_api.h is: beside the running node (<prefix>/include/node), else where node-gyp keeps headers; null when absent. */
export function nodeIncludeDir() {
  const candidates = [
    join(dirname(dirname(process.execPath)), 'include', 'node'),
    process.config.variables.node_prefix && join(process.config.variables.node_prefix, 'include', 'node'),
    join(homedir(), '.cache', 'node-gyp', process.versions.node, 'include', 'node'),
  ]
  return candidates.find((dir) => dir && existsSync(join(dir, 'node_api.h'))) ?? null
}

/** Why nothing can be built on this machine, or null. */
export function platformProblem() {
  return process.platform === 'linux' ? null : `it needs Linux, this is ${process.platform}`
}

/** Whether `target` exists and is newer than every one of `inputs` (a missing input counts as new). */
export function isFresh(target, inputs) {
  const targetTime = mtime(target)
  if (targetTime === null) return false
  return inputs.every((path) => {
    const time = mtime(path)
    return time !== null && time < targetTime
  })
}

/**
 * Runs the compiler once: `flags`, then -o output, then `sources`. Answers null when it succeeded,
 * else the reason (no compiler, or its first error line); a failed output is removed.
 * @param {{ flags: string[], sources: string[], output: string }} job
 */
export function runCompiler({ flags, sources, output }) {
  // CC may carry flags (CC="ccache gcc"), as make allows.
  const [program, ...compilerArgs] = (process.env.CC?.trim() || 'cc').split(/\s+/)
  mkdirSync(dirname(output), { recursive: true })
  const result = spawnSync(program, [...compilerArgs, ...flags, '-o', output, ...sources], { encoding: 'utf8' })
  if (result.error) {
    rmSync(output, { force: true })
    const code = /** @type {NodeJS.ErrnoException} */ (result.error).code
    return code === 'ENOENT' ? `no C compiler: ${program} not found; set CC to use another` : `${program} could not run: ${result.error.message}`
  }
  if (result.status !== 0) {
    rmSync(output, { force: true })
    const lines = (result.stderr ?? '').split('\n')
    const firstError = lines.find((line) => /error/i.test(line)) ?? lines[0] ?? ''
    const how = result.signal ? `was killed by ${result.signal}` : `exited ${result.status}`
    return `${program} ${how}${firstError ? `: ${firstError.trim()}` : ''}`
  }
  return null
}

/** A name beside `target` for its output while it is being built. */
export function temporaryBeside(target) {
  return `${target}.${process.pid}.tmp`
}

function mtime(path) {
  try {
    return statSync(path).mtimeMs
  } catch {
    return null
  }
}
