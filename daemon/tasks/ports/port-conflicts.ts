import { taskLabel, type StartTaskBody, type Task } from '../../../protocol/index.js'
import type { TaskStore } from '../../store/task-store.js'
import type { PortWatch } from './port-watch.js'

/**
 * Warnings for a start that asks for a fixed port (`port: N`, or a readiness `port`) that another
 * running task of the same owner already listens on: the agent can use that server instead of
 * starting a second one. Those tasks' ports are looked at first (at most once a second each).
 * Empty when there is no such task; tasks of other owners are never named.
 */
export async function portConflictWarnings(
  started: Task,
  request: Pick<StartTaskBody, 'port' | 'ready'>,
  deps: { store: Pick<TaskStore, 'list' | 'find'>; ports: Pick<PortWatch, 'refresh'> },
  now = Date.now(),
): Promise<string[]> {
  const wanted = new Set<number>()
  if (typeof request.port === 'number') wanted.add(request.port)
  if (request.ready?.port !== undefined) wanted.add(request.ready.port)
  if (wanted.size === 0) return []
  const others = deps.store.list({ owner: started.owner }).filter((task) => task.state === 'running' && task.id !== started.id)
  await deps.ports.refresh(others.map((task) => task.id))
  const warnings: string[] = []
  for (const port of [...wanted].sort((a, b) => a - b)) {
    for (const other of others) {
      const current = deps.store.find(other.id)
      if (current?.state !== 'running' || !current.ports?.some((socket) => socket.port === port)) continue
      warnings.push(`port ${port} is already served by task ${current.id} (${taskLabel(current)}), started ${ago(now - Date.parse(current.startedAt))}`)
    }
  }
  return warnings
}

/** `12 s ago`, `4 min ago`, `3 h ago`, `2 d ago`. */
function ago(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000))
  if (seconds < 60) return `${seconds} s ago`
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`
  if (seconds < 48 * 3600) return `${Math.floor(seconds / 3600)} h ago`
  return `${Math.floor(seconds / 86_400)} d ago`
}
