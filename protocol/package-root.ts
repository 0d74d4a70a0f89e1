import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

let found: string | undefined

/** The tend package's folder, found by walking up from this module (source tree or dist/); the same from source, dist/ and the bundles. */
export function packageRoot(): string {
  if (found !== undefined) return found
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const manifest = join(dir, 'package.json')
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'tend') return (found = dir)
    const parent = dirname(dir)
    if (parent === dir) throw new Error(`tend's package.json was not found above ${fileURLToPath(import.meta.url)}`)
    dir = parent
  }
}
