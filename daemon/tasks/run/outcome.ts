import type { Task } from '../../../protocol/index.js'
import { exitOf, readTaskExitFile } from '../../spawn/exit-file.js'
import type { SpawnExit } from '../../spawn/spawner.js'

/** How a started task's run ended, as its supervision learned it. */
export type Outcome =
  /** The spawner reported the leader's exit (an unknown one too: its keeper left no record of it). */
  | { kind: 'exited'; exit: SpawnExit }
  /** The spawner watching the task died, and its exit status with it. */
  | { kind: 'spawner-lost'; error: Error }
  /** The daemon leaves the task to the next one (stop --keep-tasks, restart): not ended. */
  | { kind: 'kept' }

/**
 * How the run ended, from what its watch of the leader answered. A spawner whose helper dies
 * attaches to the task's keeper again by itself; when it gives up (or is closed because the daemon
 * leaves its tasks running), the keeper may still have recorded the exit.
 */
export function outcomeOf(exit: SpawnExit | Error, facts: { keepingTasks: boolean; task: Task; spoolRoot: string; pid: number }): Outcome {
  if (!(exit instanceof Error)) return { kind: 'exited', exit }
  if (facts.keepingTasks) return { kind: 'kept' }
  const { task } = facts
  const recorded = task.state === 'running' && task.keeper ? readTaskExitFile(facts.spoolRoot, task.id) : null
  return recorded && recorded.pid === facts.pid ? { kind: 'exited', exit: exitOf(recorded) } : { kind: 'spawner-lost', error: exit }
}
