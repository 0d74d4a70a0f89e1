import { join } from 'node:path'
import type { SpawnRequest } from '../../daemon/spawn/spawner.js'

/** A spawn request run in `dir`, its output and exit files there, with the limits a daemon gives. */
export function spawnRequest(dir: string, overrides: Partial<SpawnRequest> & { file: string }): SpawnRequest {
  return {
    argv: [overrides.file],
    env: {},
    cwd: dir,
    outputFile: join(dir, 'output.log'),
    exitFile: join(dir, 'exit.json'),
    extraFiles: [],
    cgroups: [],
    limits: { openFiles: 1024, fileSizeBytes: 1024 * 1024 * 1024 },
    ...overrides,
  }
}
