import { join } from 'node:path'
import { packageRoot } from '../../protocol/package-root.js'

/**
 * Where daemon/native/build.mjs puts what it builds: dist/native/ under the package root, found
 * the same way from source (the tests), from dist/ and from the bundles.
 */
export function nativeArtifact(name: 'tend.node' | 'tend-spawner' | 'tend-netns'): string {
  return join(packageRoot(), 'dist', 'native', name)
}
