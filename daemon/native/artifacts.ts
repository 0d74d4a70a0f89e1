import { join } from 'node:path'
import { packageRoot } from '../../protocol/package-root.js'
import { findNativeArtifact, NATIVE_PARTS, NATIVE_PLATFORM, nativePlaces, type NativeOrigin, type NativePart } from '../../protocol/native-places.js'

/**
 * The file the daemon uses for a part, found the same way from source (the tests), from dist/ and
 * from the bundles; where none is, the source build's place, which messages then name as missing.
 */
export function nativeArtifact(part: NativePart): string {
  return (findNativeArtifact(part) ?? nativePlaces(part)[0]!).path
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
