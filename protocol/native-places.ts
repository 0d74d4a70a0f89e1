import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { packageRoot } from './package-root.js'

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
 * The daemon loads its parts from here, and the CLI looks here for what the daemon will load.
 */
export function nativePlaces(part: NativePart): Array<{ from: NativeOrigin; path: string }> {
  const native = join(packageRoot(), 'dist', 'native')
  return [
    { from: 'source', path: join(native, part) },
    { from: 'prebuilt', path: join(native, NATIVE_PLATFORM, part) },
  ]
}

/** The part's file and where it came from, or null when neither a source build nor a prebuilt one is here. */
export function findNativeArtifact(part: NativePart): { from: NativeOrigin; path: string } | null {
  return nativePlaces(part).find((place) => existsSync(place.path)) ?? null
}
