import { join } from 'node:path'
import { packageRoot } from '../protocol/package-root.js'

export { packageRoot }

export function cliEntry(): string {
  return join(packageRoot(), 'bin', 'tend.js')
}
