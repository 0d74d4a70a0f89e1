import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The tend package's folder, found by walking up from this module (source tree or dist/). */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const manifest = join(dir, 'package.json')
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'tend') return dir
    const parent = dirname(dir)
    if (parent === dir) throw new Error('tend package.json not found above the client module')
    dir = parent
  }
}

export function cliEntry(): string {
  return join(packageRoot(), 'bin', 'tend.js')
}
