import { findSandboxProcesses, findTaskProcesses } from '../../spawn/process-scan.js'
import type { Tracked } from '../run/task-run-context.js'

/**
 * A running task's processes, found as a stop finds them (kill-tree.ts): its cgroup's members when
 * it has one; else, sandboxed, every process in its pid namespace; else its leader and the
 * processes that carry its run marker (taskMarker). Each is a fact the kernel gives, looked at
 * now; the caller checks each pid's start time against pid reuse (readTaskPorts).
 */
export async function taskProcesses(tracked: Pick<Tracked, 'pid' | 'members' | 'wrapped'>, marker: string): Promise<number[]> {
  if (tracked.members) return tracked.members()
  if (tracked.wrapped) {
    const sandbox = await findSandboxProcesses(tracked.pid)
    return sandbox ? [sandbox.init.pid, ...sandbox.processes] : []
  }
  const marked = (await findTaskProcesses([marker])).get(marker) ?? []
  return [tracked.pid, ...marked]
}
