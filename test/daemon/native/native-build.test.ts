import { spawnSync } from 'node:child_process'
import { chmodSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { loadAddon } from '../../../daemon/native/load-addon.js'
import { REPO_ROOT } from '../../helpers/test-daemon.js'

const BUILD_SCRIPT = join(REPO_ROOT, 'daemon', 'native', 'build.mjs')
const BUILD_TIMEOUT_MS = 240_000
const scratch: string[] = []

afterEach(() => {
  for (const dir of scratch.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** Runs the native build into a fresh folder with `CC` set to `compiler`. */
function buildWith(compiler: string): { out: string; status: number | null; warnings: string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'tend-native-build-'))
  scratch.push(dir)
  const out = join(dir, 'native')
  const result = spawnSync(process.execPath, [BUILD_SCRIPT, '--out', out], {
    env: { ...process.env, CC: compiler },
    encoding: 'utf8',
    timeout: BUILD_TIMEOUT_MS,
  })
  expect(result.error, `the build did not finish within ${BUILD_TIMEOUT_MS} ms`).toBeUndefined()
  return { out, status: result.status, warnings: result.stderr.split('\n').filter((line) => line !== '') }
}

/** A compiler that fails on one source file and compiles every other with cc. */
function compilerFailingOn(source: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'tend-native-cc-'))
  scratch.push(dir)
  const path = join(dir, 'cc')
  writeFileSync(path, `#!/bin/sh\ncase "$*" in *${source}*) echo "${source}:1:1: error: refused by the test" >&2; exit 1;; esac\nexec cc "$@"\n`)
  chmodSync(path, 0o755)
  return path
}

test(
  'a part whose C does not compile is left out of the addon with one warning, and the other parts still load',
  () => {
    const { out, status, warnings } = buildWith(compilerFailingOn('peer-credentials.c'))
    expect(status).toBe(0)
    expect(warnings).toEqual([
      expect.stringMatching(
        /^tend: warning: the peer-credentials addon was not built \(.*refused by the test\); the daemon will not refuse requests from sandboxed tasks$/,
      ),
    ])
    const addon = join(out, 'tend.node')
    expect(loadAddon('peerCredentials', 'peer-credentials', ['inspect'], addon).reason).toMatch(
      /^the peer-credentials addon was not built \(.*has no peerCredentials/,
    )
    expect(loadAddon('durableWrite', 'durable-write', ['writeFile'], addon).reason).toBeUndefined()
    expect(loadAddon('spliceRelay', 'egress relay', ['relay', 'stop'], addon).reason).toBeUndefined()
    // The marker keeps the addon stale, so that the next build tries the part again.
    expect(readdirSync(out).sort()).toEqual(['tend-netns', 'tend-spawner', 'tend.node', 'tend.node.incomplete'])
  },
  BUILD_TIMEOUT_MS + 10_000,
)

test(
  'without a C compiler the build succeeds, builds nothing, and warns once per part with what the daemon does without it',
  () => {
    const { out, status, warnings } = buildWith('/nonexistent/cc')
    expect(status).toBe(0)
    // Seven addon parts and two executables (daemon/native/build.mjs).
    expect(warnings).toHaveLength(9)
    for (const warning of warnings)
      expect(warning).toMatch(/^tend: warning: .+ was not built \(no C compiler: \/nonexistent\/cc not found; set CC to use another\); .+$/)
    expect(readdirSync(out)).toEqual([])
    expect(loadAddon('memoryRelease', 'memory-release', ['releaseFreeMemory'], join(out, 'tend.node')).reason).toMatch(
      /^the memory-release addon was not built \(.*is missing/,
    )
  },
  BUILD_TIMEOUT_MS + 10_000,
)

test(
  'with --prebuilt, for a package, a build that leaves any part out fails and names the parts',
  () => {
    const dir = mkdtempSync(join(tmpdir(), 'tend-native-build-'))
    scratch.push(dir)
    const result = spawnSync(process.execPath, [BUILD_SCRIPT, '--prebuilt', '--out', join(dir, 'native')], {
      env: { ...process.env, CC: '/nonexistent/cc' },
      encoding: 'utf8',
      timeout: BUILD_TIMEOUT_MS,
    })
    expect(result.status).toBe(1)
    expect(result.stderr.trim().split('\n').at(-1)).toBe(
      `tend: the prebuilt parts are not whole: tend.node, tend-spawner, tend-netns not built into ${join(dir, 'native')}`,
    )
  },
  BUILD_TIMEOUT_MS + 10_000,
)

test('a folder it cannot make is refused with the command to run instead, before anything is built', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tend-native-build-'))
  scratch.push(dir)
  // A folder under a file: not even root can make it.
  writeFileSync(join(dir, 'file'), '')
  const out = join(dir, 'file', 'native')
  const result = spawnSync(process.execPath, [BUILD_SCRIPT, '--out', out], { encoding: 'utf8', timeout: BUILD_TIMEOUT_MS })
  expect(result.status).toBe(1)
  expect(result.stderr).toBe(`tend: cannot build into ${out} (ENOTDIR): run this as the user who installed tend, e.g. \`sudo node ${BUILD_SCRIPT}\`\n`)
})
