'use strict'
// Loads one of tend's bundles (dist/bundle/<name>.cjs), with V8's code cache kept on disk for the
// CLI so that a later command skips compiling its bundle (~15 ms to load it, ~9 with the cache).
// Node >= 22.1 caches every bundle itself (module.enableCompileCache); before, the CLI's bundle is
// cached here through vm.Script's cachedData. Either way the cache lives in a folder of the user's
// own. The daemon and the MCP server are not cached by hand: a long-lived process keeps the code
// the cache holds resident (the daemon's idle RSS rose ~5 MiB), and on Node 20 an import() in code
// read back from a cache fails ("A dynamic import callback was not specified"); both load once.
const Module = require('node:module')
const { lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } = require('node:fs')
const { homedir } = require('node:os')
const { dirname, isAbsolute, join } = require('node:path')

const BUNDLE_DIR = join(__dirname, '..', 'dist', 'bundle')
/** The bundles cached by hand where Node does not: short-lived processes whose bundle holds no import(). */
const CACHED_BY_HAND = new Set(['cli'])

/** The exports of dist/bundle/<name>.cjs. */
function loadBundle(name) {
  const file = join(BUNDLE_DIR, `${name}.cjs`)
  if (!Module.enableCompileCache && !CACHED_BY_HAND.has(name)) return require(file)
  const dir = privateCompileCacheDir()
  if (dir === null) return require(file)
  if (Module.enableCompileCache) {
    Module.enableCompileCache(dir)
    return require(file)
  }
  return requireWithCodeCache(file, dir, name)
}

/**
 * What require(file) does, compiled through vm.Script with the cache of this very file (named by
 * its inode, size and mtime: V8 itself checks only the source's length, not its bytes). A missing
 * or refused cache (another Node, other V8 flags) is written anew, right after loading.
 */
function requireWithCodeCache(file, dir, name) {
  const vm = require('node:vm')
  const stat = statSync(file)
  const cacheFile = join(dir, `${name}-${process.version}-${process.arch}-${stat.ino}-${stat.size}-${Math.trunc(stat.mtimeMs)}.v8cache`)
  let cachedData
  try {
    cachedData = readFileSync(cacheFile)
  } catch {
    cachedData = undefined
  }
  const script = new vm.Script(Module.wrap(readFileSync(file, 'utf8')), { filename: file, cachedData })
  const loaded = new Module(file, module)
  loaded.filename = file
  script.runInThisContext().call(loaded.exports, loaded.exports, Module.createRequire(file), loaded, file, dirname(file))
  loaded.loaded = true
  if (cachedData === undefined || script.cachedDataRejected) save(script, cacheFile, dir, name)
  return loaded.exports
}

/** Writes the cache; one that cannot be written (a full disk, a folder gone) only costs speed. */
function save(script, cacheFile, dir, name) {
  try {
    const temp = `${cacheFile}.${process.pid}.tmp`
    writeFileSync(temp, script.createCachedData(), { mode: 0o600 })
    renameSync(temp, cacheFile)
    // Caches of earlier builds of this bundle (and temporary files a killed process left).
    for (const entry of readdirSync(dir)) {
      if (entry.startsWith(`${name}-`) && join(dir, entry) !== cacheFile) rmSync(join(dir, entry), { force: true })
    }
  } catch {
    // The next command compiles again.
  }
}

/**
 * $XDG_CACHE_HOME/tend/compile-cache (else ~/.cache/...), made 0700, or null unless this user owns
 * it and its parent and no one else may write them. Node's own default is a folder in the shared
 * temporary directory, which any local user (a task running as another user, sandbox off) can
 * create first: the compiled code read back from there would be theirs, run as whoever runs tend.
 */
function privateCompileCacheDir() {
  const cacheHome = process.env.XDG_CACHE_HOME && isAbsolute(process.env.XDG_CACHE_HOME) ? process.env.XDG_CACHE_HOME : join(homedir(), '.cache')
  const dir = join(cacheHome, 'tend', 'compile-cache')
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const ownAndClosed = (path) => {
      const stat = lstatSync(path)
      return stat.isDirectory() && stat.uid === process.getuid() && (stat.mode & 0o022) === 0
    }
    // The parent too: whoever may write it could swap the cache folder for their own.
    return ownAndClosed(dir) && ownAndClosed(dirname(dir)) ? dir : null
  } catch {
    return null
  }
}

module.exports = { loadBundle }
