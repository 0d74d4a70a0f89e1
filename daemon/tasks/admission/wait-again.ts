import type { QueuedTask, TaskDependencies } from '../../../protocol/index.js'
import type { LaunchNeeds } from '../run/task-run-context.js'
import { admittedPaths, type AdmissionContext } from './admit.js'

/**
 * What a task an earlier daemon left waiting for its dependencies needs to wait again and start:
 * its folders pinned anew (the pins died with that daemon). What it cannot get back is the values
 * of its environment, which are never stored: a task that had any fails, saying so, rather than
 * start without them.
 */
export async function waitAgain(
  context: Pick<AdmissionContext, 'config' | 'capabilities' | 'protectedView'>,
  task: QueuedTask,
): Promise<{ fail: string } | { needs: LaunchNeeds; after: TaskDependencies }> {
  if (!task.after) return { fail: 'the daemon stopped before the task started' }
  // PORT is the one value the record keeps (its port).
  const port = task.port ?? null
  const lost = task.envKeys.filter((key) => port === null || key !== 'PORT')
  if (lost.length > 0)
    return {
      fail:
        `the daemon restarted while the task waited for its dependencies, and the values of its environment ` +
        `(${lost.join(', ')}) are never stored: start it again`,
    }
  try {
    const paths = await admittedPaths(context, task)
    return { needs: { env: port === null ? {} : { PORT: String(port) }, paths, endsWithDaemon: false }, after: task.after }
  } catch (error) {
    return { fail: `its folders could not be pinned again after the daemon restarted: ${(error as Error).message}` }
  }
}
