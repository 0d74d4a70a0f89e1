import type { Task } from '../../../protocol/index.js'
import { exitPath, outputPath } from '../../../spool/index.js'
import { launchTask, type LaunchOutcome, type LaunchRequest } from './launch.js'
import type { LaunchNeeds, TaskRunContext } from './task-run-context.js'

/**
 * Holds the queued task's output file (before the task can touch it: the file its keeper will
 * open), then starts its process. Whatever goes wrong on the way to a process is this task's
 * failure, answered as its reason, never the daemon's.
 */
export async function startProcess(context: TaskRunContext, task: Task, needs: LaunchNeeds, masks: LaunchRequest['masks']): Promise<LaunchOutcome> {
  const { config, log, outputs, spawner, capabilities, networks } = context
  const outputFile = outputPath(config.layout.spool, task.id)
  await outputs
    .hold(task.id, outputFile)
    .catch((error: unknown) => log.warn({ taskId: task.id, err: error }, 'output.log cannot be held open: it is read by its path'))
  const request: LaunchRequest = {
    task,
    outputFile,
    exitFile: exitPath(config.layout.spool, task.id),
    envAdditions: needs.env,
    paths: needs.paths,
    endsWithDaemon: needs.endsWithDaemon,
    masks,
    config,
    capabilities,
    spawner,
    networks,
  }
  return launchTask(request).catch((error: unknown): LaunchOutcome => {
    log.error({ taskId: task.id, err: error }, 'launching the task failed')
    return { started: false, reason: `could not start the task: ${(error as Error).message}` }
  })
}
