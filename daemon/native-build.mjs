// What the native builds (daemon/spawner/, daemon/peer/, daemon/durable-write/, daemon/memory/ build.mjs) share: compile C
// sources into one file under dist/, only when a source is newer, next to the target then renamed
// over it (a running daemon keeps the file it loaded). Never fails the install: any problem is
// one warning line, and the daemon runs without that part (it says so).
import { spawnSync } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

/** Where node_api.h is (for the addons): beside the running node (<prefix>/include/node), else where node-gyp keeps headers; null when absent. */
export function nodeIncludeDir() {
  const candidates = [
    join(dirname(dirname(process.execPath)), 'include', 'node'),
    process.config.variables.node_prefix && join(process.config.variables.node_prefix, 'include', 'node'),
    join(homedir(), '.cache', 'node-gyp', process.versions.node, 'include', 'node'),
  ]
  return candidates.find((dir) => dir && existsSync(join(dir, 'node_api.h'))) ?? null
}

/**
 * Compiles one N-API addon (a single C file that includes node_api.h) to `target`.
 * @param {object} job
 * @param {string} job.root         the repository root
 * @param {string} job.target       the .node file to build
 * @param {string} job.source       the C file
 * @param {string} job.buildScript  the calling build script (a change to it rebuilds)
 * @param {(reason: string) => void} job.warn  prints the one warning line
 */
export function compileAddon({ root, target, source, buildScript, warn }) {
  const include = nodeIncludeDir()
  compileC({
    root,
    target,
    sources: [source],
    inputs: [source, buildScript, fileURLToPath(import.meta.url)],
    flags: ['-std=gnu11', '-O2', '-Wall', '-Wextra', '-fPIC', '-shared', '-fvisibility=hidden', `-I${include}`],
    precondition: () => (include === null ? `Node's headers (node_api.h) were not found beside ${process.execPath}; install them (e.g. the nodejs-dev or libnode-dev package)` : null),
    warn,
  })
}

/**
 * @param {object} job
 * @param {string} job.root       the repository root (paths in warnings are relative to it)
 * @param {string} job.target     the file to build
 * @param {string[]} job.sources  C files to compile
 * @param {string[]} job.inputs   every file whose change calls for a rebuild (sources, headers, the build script)
 * @param {string[]} job.flags    compiler flags besides -o and the sources
 * @param {number} [job.mode]     file mode of the target (an executable: 0o755)
 * @param {() => string | null} [job.precondition]  a reason not to build (e.g. missing headers), or null
 * @param {(reason: string) => void} job.warn  prints the one warning line, naming what is missing
 */
export function compileC(job) {
  try {
    build(job)
  } catch (error) {
    job.warn(error instanceof Error ? error.message : String(error))
  }
  process.exitCode = 0
}

function build({ root, target, sources, inputs, flags, mode, precondition, warn }) {
  if (process.platform !== 'linux') return warn(`it needs Linux, this is ${process.platform}`)
  const missing = sources.find((path) => mtime(path) === null)
  if (missing) return warn(`${relative(root, missing)} is missing`)
  const sourceTime = Math.max(...inputs.map((path) => mtime(path) ?? 0))
  const targetTime = mtime(target)
  if (targetTime !== null && targetTime > sourceTime) return
  const problem = precondition?.() ?? null
  if (problem) return warn(problem)

  // A stale build must not outlive a failed one (its protocol may be older than the daemon's).
  rmSync(target, { force: true })
  mkdirSync(dirname(target), { recursive: true })
  const temporary = `${target}.${process.pid}.tmp`
  // CC may carry flags (CC="ccache gcc"), as make allows.
  const [program, ...compilerArgs] = (process.env.CC?.trim() || 'cc').split(/\s+/)
  const result = spawnSync(program, [...compilerArgs, ...flags, '-o', temporary, ...sources], { encoding: 'utf8' })
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
  if (mode !== undefined) chmodSync(temporary, mode)
  renameSync(temporary, target)
}

function mtime(path) {
  try {
    return statSync(path).mtimeMs
  } catch {
    return null
  }
}
