import { readFileSync } from 'node:fs'

/** tend's version, from the package.json above this file (in the source tree or in dist/). */
export function readVersion(): string {
  for (const relative of ['../package.json', '../../package.json']) {
    try {
      const manifest = JSON.parse(readFileSync(new URL(relative, import.meta.url), 'utf8')) as { name?: string; version?: string }
      if (manifest.name === 'tend' && manifest.version) return manifest.version
    } catch {
      // try the next level up
    }
  }
  return '0.0.0'
}
