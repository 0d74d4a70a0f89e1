import { ClusterClient } from './cluster-client.js'
import { normalizeClusterChoice, type ClusterTaskOptions } from './cluster-choice.js'
import { ClusterTasks } from './cluster-tasks.js'
import type { TaskService } from '../task-service.js'

export { ClusterClient, type ClusterStartOptions } from './cluster-client.js'
export type { ClusterTask } from './cluster-records.js'
export { ClusterTasks } from './cluster-tasks.js'
export { clusterUrlFromArgv, normalizeClusterChoice, withoutClusterOptions, type ClusterChoice, type ClusterTaskOptions } from './cluster-choice.js'

/** The owner's tasks on the cluster the options (or the environment) name; undefined when none is named. */
export function clusterTasksFor(options: ClusterTaskOptions & { env?: Record<string, string | undefined> }, owner: string): TaskService | undefined {
  const chosen = normalizeClusterChoice(options)
  if (chosen === undefined) return undefined
  return new ClusterTasks(new ClusterClient(chosen.redis, chosen.queue, { keyFile: chosen.keyFile }), owner)
}
