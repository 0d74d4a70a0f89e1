import type { DaemonStatus } from '../../protocol/index.js'
import type { DaemonConfig } from '../config.js'
import type { SandboxCapabilities } from './capabilities.js'

type Bounds = DaemonStatus['sandbox']['bounds']

/**
 * What each sandboxed profile this machine can run bounds per task, for `tend status`: the
 * process and memory limits a task that gives none gets (cgroups), whether its memory is counted,
 * and what its private tmpfs mounts hold together (always capped).
 */
export function sandboxBounds(capabilities: SandboxCapabilities, config: Readonly<DaemonConfig>): Bounds {
  const { cgroups } = capabilities
  const bounds: Bounds = {}
  if (capabilities.profiles.includes('workspace')) {
    bounds.workspace = {
      pidsMax: cgroups.pids ? config.workspacePidsMax : null,
      memoryBytes: null,
      memoryAccounted: cgroups.pids !== null && cgroups.memory !== null,
      tmpfsBytes: config.tmpSizeBytes,
    }
  }
  if (capabilities.profiles.includes('strict')) {
    bounds.strict = { pidsMax: config.strictPidsMax, memoryBytes: config.strictMemoryBytes, memoryAccounted: true, tmpfsBytes: config.tmpSizeBytes }
  }
  if (cgroups.problem) bounds.reason = cgroups.problem
  bounds.allTasksPidsMax = cgroups.allTasksPidsMax ?? null
  if (cgroups.allDaemonsPidsMax !== undefined) bounds.allDaemonsPidsMax = cgroups.allDaemonsPidsMax
  if (cgroups.allDaemonsProblem) bounds.allDaemonsProblem = cgroups.allDaemonsProblem
  return bounds
}
