#!/usr/bin/env node
// Builds tend's C, the last step of `npm run build`, into dist/native/:
//   tend.node     one N-API addon with every in-process part (ADDON_PARTS), loaded by
//                 daemon/native/load-addon.ts;
//   tend-spawner  the native spawner (every .c file of daemon/spawner/);
//   tend-netns    the network holder (daemon/network/holder/tend-netns.c).
// Each is rebuilt only when one of its inputs is newer. Nothing here fails the install: each part
// that cannot be built (no C compiler, no Node headers, a compile error) is one warning line that
// says what the daemon does without it, and the daemon runs without that part (it says so too).
//
// The package ships these prebuilt for the platform it was packed on, in dist/native/<platform>/
// (`npm pack` runs this with --prebuilt); where they do not run, or none were shipped for the
// platform, the user runs this script in the installed package, which builds from the C sources the
// package ships into its dist/native/, looked for first (daemon/native/artifacts.ts).
//
//   node daemon/native/build.mjs              build what is stale into dist/native/
//   node daemon/native/build.mjs --prebuilt   build into dist/native/<platform>-<arch>/, every part or fail (npm pack)
//   node daemon/native/build.mjs --out DIR    build into DIR instead (the build's own test)
//   node daemon/native/build.mjs --sources    print every C file built (for .ci/c-check)
import { accessSync, chmodSync, constants, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { isFresh, nodeIncludeDir, platformProblem, runCompiler, temporaryBeside } from './compile.mjs'

const HERE = dirname(fileURLToPath(import.meta.url))
const ROOT = join(HERE, '..', '..')
const NATIVE_DIR = join(ROOT, 'dist', 'native')
/** Where the package's prebuilt parts are, as daemon/native/artifacts.ts looks for them. */
const PREBUILT_DIR = join(NATIVE_DIR, `${process.platform}-${process.arch}`)
const FLAGS = ['-std=gnu11', '-O2', '-Wall', '-Wextra']

/**
 * The addon's parts: `define` names it to addon.c (-DTEND_WITH_<define>), `source` is its C file,
 * `without` what the daemon does when it is absent.
 */
const ADDON_PARTS = [
  {
    name: 'peer-credentials',
    define: 'PEER_CREDENTIALS',
    source: 'daemon/peer/peer-credentials.c',
    without: 'the daemon will not refuse requests from sandboxed tasks',
  },
  {
    name: 'durable-write',
    define: 'DURABLE_WRITE',
    source: 'daemon/durable-write/durable-write.c',
    without: "the daemon writes task records with Node's fs calls instead",
  },
  {
    name: 'memory-release',
    define: 'MEMORY_RELEASE',
    source: 'daemon/memory/release-memory.c',
    without: 'an idle daemon keeps the memory malloc has freed',
  },
  {
    name: 'instance-lock',
    define: 'INSTANCE_LOCK',
    source: 'daemon/lock/instance-flock.c',
    without: 'the daemon takes its lock through flock(1)',
  },
  {
    name: 'network holder',
    define: 'HOLDER_CONTROL',
    source: 'daemon/network/holder/holder-control.c',
    without: 'sandboxed tasks cannot have the loopback and allow networks',
  },
  {
    name: 'egress relay',
    define: 'SPLICE_RELAY',
    source: 'daemon/network/relay/splice-relay.c',
    without: 'the egress proxy relays through Node streams (slower)',
  },
  {
    name: 'service-notify',
    define: 'SERVICE_NOTIFY',
    source: 'daemon/service/sd-notify.c',
    without: 'tend service install writes a Type=exec unit: systemd takes the daemon as started before its socket answers',
  },
]
const ADDON_MAIN = ['daemon/native/addon.c', 'daemon/native/addon.h']

const filesIn = (folder, extension) =>
  readdirSync(join(ROOT, folder))
    .filter((name) => name.endsWith(extension))
    .sort()
    .map((name) => `${folder}/${name}`)

/** The executables: `sources` compile together into dist/native/<name>. */
const EXECUTABLES = [
  {
    name: 'tend-spawner',
    what: 'the native spawner',
    sources: filesIn('daemon/spawner', '.c'),
    headers: filesIn('daemon/spawner', '.h'),
    without: "tasks will start through Node's child_process (slower)",
  },
  {
    name: 'tend-netns',
    what: 'the network holder (tend-netns)',
    sources: ['daemon/network/holder/tend-netns.c'],
    headers: [],
    without: 'sandboxed tasks cannot have the loopback and allow networks',
  },
]

/** Every C file that is built, relative to the package root. */
function cSources() {
  return [ADDON_MAIN[0], ...ADDON_PARTS.map((part) => part.source), ...EXECUTABLES.flatMap((executable) => executable.sources)]
}

const BUILD_SCRIPTS = [fileURLToPath(import.meta.url), join(HERE, 'compile.mjs')]
const absolute = (path) => join(ROOT, path)
const warn = (what, reason, without) => process.stderr.write(`tend: warning: ${what} was not built (${reason}); ${without}\n`)

function buildExecutable(out, { name, what, sources, headers, without }) {
  const target = join(out, name)
  if (isFresh(target, [...sources, ...headers].map(absolute).concat(BUILD_SCRIPTS))) return
  // A stale build must not outlive a failed one (its protocol may be older than the daemon's).
  rmSync(target, { force: true })
  const problem = platformProblem() ?? missing(sources)
  if (problem) return warn(what, problem, without)
  const temporary = temporaryBeside(target)
  const reason = runCompiler({ flags: FLAGS, sources: sources.map(absolute), output: temporary })
  if (reason) return warn(what, reason, without)
  chmodSync(temporary, 0o755)
  renameSync(temporary, target)
}

/** Each part compiles on its own, so that one that fails leaves the others in the addon. */
function buildAddon(out) {
  const addon = join(out, 'tend.node')
  // Lists the parts that did not build into the addon; while it exists the addon counts as stale.
  const incomplete = `${addon}.incomplete`
  const inputs = [...ADDON_MAIN, ...ADDON_PARTS.map((part) => part.source)].map(absolute).concat(BUILD_SCRIPTS)
  if (!existsSync(incomplete) && isFresh(addon, inputs)) return
  rmSync(addon, { force: true })
  rmSync(incomplete, { force: true })
  const include = nodeIncludeDir()
  const noHeaders = `Node's headers (node_api.h) were not found beside ${process.execPath}; install them (e.g. the nodejs-dev or libnode-dev package)`
  const problem = platformProblem() ?? missing(ADDON_MAIN) ?? (include === null ? noHeaders : null)
  const failed = (part, reason) => warn(`the ${part.name} addon`, reason, part.without)
  if (problem) return ADDON_PARTS.forEach((part) => failed(part, problem))

  const flags = [...FLAGS, '-fPIC', '-fvisibility=hidden', `-I${include}`]
  mkdirSync(out, { recursive: true })
  const objects = mkdtempSync(join(out, 'objects-'))
  try {
    const built = ADDON_PARTS.filter((part) => {
      const output = join(objects, `${part.define}.o`)
      const reason = missing([part.source]) ?? runCompiler({ flags: [...flags, '-c'], sources: [absolute(part.source)], output })
      if (reason) failed(part, reason)
      return reason === null
    })
    const temporary = temporaryBeside(addon)
    const defines = built.map((part) => `-DTEND_WITH_${part.define}`)
    const sources = [absolute(ADDON_MAIN[0]), ...built.map((part) => join(objects, `${part.define}.o`))]
    const reason = runCompiler({ flags: [...flags, '-shared', ...defines], sources, output: temporary })
    if (reason) return built.forEach((part) => failed(part, reason))
    renameSync(temporary, addon)
    const absent = ADDON_PARTS.filter((part) => !built.includes(part))
    if (absent.length > 0) writeFileSync(incomplete, `${absent.map((part) => part.name).join('\n')}\n`)
  } finally {
    rmSync(objects, { recursive: true, force: true })
  }
}

function missing(sources) {
  const absent = sources.find((path) => !existsSync(absolute(path)))
  return absent ? `${absent} is missing` : null
}

/** Null when `out` can be built into, else why not and what to run instead (an installed package may belong to root). */
function unwritable(out) {
  try {
    mkdirSync(out, { recursive: true })
    accessSync(out, constants.W_OK)
    return null
  } catch (error) {
    const script = fileURLToPath(import.meta.url)
    return `tend: cannot build into ${out} (${error.code ?? error.message}): run this as the user who installed tend, e.g. \`sudo node ${script}\``
  }
}

/** The parts a --prebuilt build must leave, each whole: a package without one would fall back to the source build everywhere. */
function missingParts(out) {
  const names = ['tend.node', ...EXECUTABLES.map((executable) => executable.name)]
  const absent = names.filter((name) => !existsSync(join(out, name)))
  return existsSync(join(out, 'tend.node.incomplete')) ? [...absent, 'tend.node (incomplete)'] : absent
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (process.argv.includes('--sources')) {
    process.stdout.write(`${cSources().join('\n')}\n`)
  } else {
    const prebuilt = process.argv.includes('--prebuilt')
    const out = process.argv.includes('--out') ? resolve(process.argv[process.argv.indexOf('--out') + 1] ?? '') : prebuilt ? PREBUILT_DIR : NATIVE_DIR
    const problem = unwritable(out)
    if (problem) {
      process.stderr.write(`${problem}\n`)
      process.exit(1)
    }
    buildAddon(out)
    for (const executable of EXECUTABLES) buildExecutable(out, executable)
    const missing = prebuilt ? missingParts(out) : []
    if (missing.length > 0) {
      process.stderr.write(`tend: the prebuilt parts are not whole: ${missing.join(', ')} not built into ${out}\n`)
      process.exit(1)
    }
    // Said to a user who ran it (the fallback), not on every `npm run build`.
    if (process.env.npm_lifecycle_event === undefined)
      process.stdout.write(`tend: native parts in ${out}; a running daemon uses them once restarted (tend stop)\n`)
  }
}
