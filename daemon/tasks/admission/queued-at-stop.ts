import type { Task } from '../../../protocol/index.js'
import type { TaskStore } from '../../store/task-store.js'
import type { TaskRun } from '../run/task-run.js'
import { markFailed } from '../transitions.js'

/** What the daemon's stop does with its queued tasks. */
export interface QueuedAtStop {
  /** Why the daemon stops: the failed record says `<reason> before the task started`. */
  reason: string
  /** Whether this queued task waits on under the next daemon (one still waiting for its dependencies, when tasks are kept). */
  keeps: (id: string) => boolean
  /** Wakes the readers of a task recorded finished. */
  wakeReaders: (task: Task) => void
}

/**
 * Queued tasks that are not being launched never start: recorded failed in one synchronous pass,
 * so no launch can begin after it. Tasks being launched are stopped once they run. Answers each
 * record's write (its readers woken once it lands).
 */
export function failQueuedAtStop(
  store: Pick<TaskStore, 'list' | 'transition'>,
  runs: ReadonlyMap<string, Pick<TaskRun, 'launching' | 'dropLaunch'>>,
  stop: QueuedAtStop,
): Array<Promise<void>> {
  const now = new Date()
  const cancelled: Array<Promise<void>> = []
  for (const task of store.list()) {
    const run = runs.get(task.id)
    if (task.state !== 'queued' || run?.launching) continue
    if (stop.keeps(task.id)) continue
    run?.dropLaunch()
    const failed = store.transition(task.id, (current) =>
      current.state === 'queued' ? markFailed(current, `${stop.reason} before the task started`, now, 'daemon-stop') : null,
    )
    cancelled.push(failed.then((ended) => stop.wakeReaders(ended)))
  }
  return cancelled
}
