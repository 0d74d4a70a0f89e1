import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { packageRoot } from '../../protocol/package-root.js'

/** tend's native parts: the N-API addon and the two executables that daemon/native/build.mjs builds. */
export const NATIVE_PARTS = ['tend.node', 'tend-spawner', 'tend-netns'] as const
export type NativePart = (typeof NATIVE_PARTS)[number]

/** The platform the package's prebuilt parts are looked for under: `linux-x64`, as `build.mjs --prebuilt` names its folder. */
export const NATIVE_PLATFORM = `${process.platform}-${process.arch}`

/**
 * Where a part was found: `source` when built on this machine into dist/native/ (`npm run build` in
 * a checkout, or the build.mjs command of nativeBuildCommand() run in an installed package),
 * `prebuilt` when it is the one the package shipped, in dist/native/<platform>/ (built by `npm pack`).
 */
export type NativeOrigin = 'source' | 'prebuilt'

/**
 * The places a part is looked for, in order. A source build comes first: it exists only where
 * someone built it here, in a checkout or because the prebuilt part did not run on this machine.
 */
function places(part: NativePart): Array<{ from: NativeOrigin; path: string }> {
  const native = join(packageRoot(), 'dist', 'native')
  return [
    { from: 'source', path: join(native, part) },
    { from: 'prebuilt', path: join(native, NATIVE_PLATFORM, part) },
  ]
}

/** The part's file and where it came from, or null when neither a source build nor a prebuilt one is here. */
export function findNativeArtifact(part: NativePart): { from: NativeOrigin; path: string } | null {
  return places(part).find((place) => existsSync(place.path)) ?? null
}

/**
 * The file the daemon uses for a part, found the same way from source (the tests), from dist/ and
 * from the bundles; where none is, the source build's place, which messages then name as missing.
 */
export function nativeArtifact(part: NativePart): string {
  return (findNativeArtifact(part) ?? places(part)[0]!).path
}

/** The one command that builds every part from source into this package's dist/native/ (it needs cc and Node's headers). */
export function nativeBuildCommand(): string {
  return `node ${join(packageRoot(), 'daemon', 'native', 'build.mjs')}`
}

/** What `tend status` says of the native parts: each one's origin and file (none: not here), and the command that builds them. */
export interface NativeReport {
  platform: string
  parts: Array<{ name: NativePart; from: NativeOrigin | 'none'; path: string | null }>
  build: string
}

export function nativeReport(): NativeReport {
  const parts = NATIVE_PARTS.map((name) => {
    const found = findNativeArtifact(name)
    return { name, from: found?.from ?? ('none' as const), path: found?.path ?? null }
  })
  return { platform: NATIVE_PLATFORM, parts, build: nativeBuildCommand() }
}
